"""``forget`` and the derivation lane's last problem: its text can quote the model's answer,
which quotes the turn ("the answer is not JSON: 'The user lives in Lisbon ...'"). It is shown by
``doctor`` and ``sessions facts --state`` until a turn goes through cleanly; after a forget it
must not show the subject. Real archives on both backends.
"""

from __future__ import annotations

from pathlib import Path

from hermes_core.plugins.memory.session_archive import SessionArchiveConfig, open_archive
from hermes_core.plugins.memory.session_archive.derive import parse_facts
from hermes_core.plugins.memory.session_archive.facts import (
    derivation_state,
    pending_turns,
    save_turn,
)
from hermes_core.plugins.memory.session_archive.forget import forget_messages
from hermes_core.types import Message, Session


def test_the_lanes_last_problem_does_not_keep_a_forgotten_subject(
        tmp_path: Path, storage_url: str | None) -> None:
    archive = open_archive(SessionArchiveConfig(), tmp_path, storage_url)
    try:
        archive.open_session(Session(id="s1"))
        archive.append_message("s1", Message("user", "I live in Lisbon now"))
        archive.append_message("s1", Message("assistant", "Noted."))
        through, (turn,) = pending_turns(archive)
        facts, problems = parse_facts("The user lives in Lisbon, I believe.", turn, set())
        assert facts == [] and problems  # the model answered in prose: quoted in the problem
        assert save_turn(archive, turn, through, facts, model=None, input_tokens=1,
                         output_tokens=1, problem="; ".join(problems))
        assert "Lisbon" in (derivation_state(archive).error or "")
        forget_messages(archive, "lisbon")
        error = derivation_state(archive).error
        assert error is not None and "lisbon" not in error.lower()  # the problem is still told
    finally:
        archive.close()
