"""``forget`` and derived facts: a fact whose *topic* names the subject goes too.

The derivation keeps one topic per slot ("lisbon office") and a later fact updating it keeps
the slot's name while its text may not repeat the subject ("The office has 12 people"). The
topic is shown wherever the fact is (``session_search``'s ``facts``, ``sessions facts``), so a
forget that matched the text alone left the subject on display. Real archives on both
backends; the facts are stored through the derivation's own write path (``save_turn``).
"""

from __future__ import annotations

from pathlib import Path

from hermes_core.plugins.memory.session_archive import SessionArchiveConfig, open_archive
from hermes_core.plugins.memory.session_archive.fact_search import search_facts
from hermes_core.plugins.memory.session_archive.facts import (
    NewFact,
    list_facts,
    pending_turns,
    save_turn,
)
from hermes_core.plugins.memory.session_archive.forget import forget_messages
from hermes_core.types import Message, Session


def test_a_fact_whose_topic_names_the_subject_is_forgotten(tmp_path: Path,
                                                          storage_url: str | None) -> None:
    archive = open_archive(SessionArchiveConfig(), tmp_path, storage_url)
    try:
        archive.open_session(Session(id="s1"))
        for role, text in (("user", "We opened an office in Lisbon"), ("assistant", "Nice."),
                           ("user", "The office has 12 people now"), ("assistant", "Great.")):
            archive.append_message("s1", Message(role, text))
        through, (first, second) = pending_turns(archive)
        opened = NewFact("state", "lisbon office", "The user opened an office in Lisbon", 1.0,
                         [first.messages[0][0]])
        assert save_turn(archive, first, through, [opened], model=None, input_tokens=0,
                         output_tokens=0, problem=None)
        (old,) = list_facts(archive)
        grown = NewFact("state", "lisbon office", "The office has 12 people", 2.0,
                        [second.messages[0][0]], supersedes=[old.id])
        assert save_turn(archive, second, first.end, [grown], model=None, input_tokens=0,
                         output_tokens=0, problem=None)

        plan = forget_messages(archive, "LISBON", dry_run=True)
        assert len(plan.facts) == 2  # the plan shows both
        forget_messages(archive, "Lisbon")

        shown = [f.to_dict() for f in list_facts(archive, all_users=True)]
        shown += search_facts(archive, "office people", user=None)
        assert not [f for f in shown if "lisbon" in str(f).lower()]
    finally:
        archive.close()
