"""``forget`` against the loopback Honcho server: conclusions and card lines go; messages cannot."""

from __future__ import annotations

import json
from typing import Any

from hermes_core.types import ForgetReport, Message, Session, ToolContext

CTX = ToolContext(session=Session(id="tool-session"))


def call(provider: Any, name: str, **args: Any) -> dict[str, Any]:
    tool = next(t for t in provider.get_tools() if t.name == name)
    return json.loads(tool.invoke(args, CTX))


def test_forget_deletes_conclusions_and_card_lines_and_says_messages_stay(make_provider: Any) -> None:
    provider = make_provider()
    provider.sync_turn(user_message=Message("user", "I moved to Lisbon."),
                       assistant_message=Message("assistant", "Lisbon, nice."),
                       session=Session(id="earlier"))
    assert provider.wait_idle(5)
    call(provider, "honcho_conclude", conclusion="Lives in Lisbon")
    call(provider, "honcho_conclude", conclusion="Keeps three beehives")
    call(provider, "honcho_profile", card=["Lives in LISBON", "Uses Helix"])

    dry = provider.forget(subject="lisbon", scope="all", dry_run=True)
    assert isinstance(dry, ForgetReport) and dry.matched == 2 and dry.deleted == 0
    assert len(call(provider, "honcho_conclude", list=True)["conclusions"]) == 2

    done = provider.forget(subject="lisbon", scope="all", dry_run=False)
    assert done.deleted == 2 and "no call to delete messages" in (done.cannot_delete or "")
    left = call(provider, "honcho_conclude", list=True)["conclusions"]
    assert ["Lisbon" not in json.dumps(c) for c in left] == [True]
    assert call(provider, "honcho_profile", peer="user")["card"] == ["Uses Helix"]
    # a scope for another user is refused, nothing read or deleted
    other = provider.forget(subject="Helix", scope="user:someone-else", dry_run=False)
    assert other.deleted == 0 and "one user peer" in (other.cannot_delete or "")
