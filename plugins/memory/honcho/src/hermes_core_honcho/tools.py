"""The five tools the model gets: honcho_profile, honcho_search, honcho_context, honcho_conclude and
honcho_reasoning.

Each makes its requests on the turn's thread, once (no retry: the model can try again), under
``honcho.tool_timeout``. Whatever goes wrong (Honcho down, slow, refusing, answering junk, an
invalid peer id) reaches the model as a tool error (:class:`~hermes_core.errors.ToolError`) that
says what happened; nothing is raised into the agent loop. Answers are JSON objects.

``peer`` accepts ``user`` (the default), ``ai`` (the agent itself) or any peer id of the workspace.
With ``memory.scope: user``, ``user`` is the calling session's user's own peer, and no other user's
peer can be named: a peer id other than the session's user's and the agent's is refused, searches
cover only the sessions of the session's user, and a conclusion can only be deleted by the user it
is about.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hermes_core.errors import ToolError
from hermes_core.kinds import Tool
from hermes_core.types import ToolContext

from .client import HonchoError
from .config import ID_RE, ReasoningLevel, check_id

if TYPE_CHECKING:
    from .provider import HonchoProvider

__all__ = ["build_tools"]

_PEER = Field(default="user", description="whose: 'user' (default), 'ai' (yourself) or a peer id",
              max_length=100)


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ProfileArgs(_Args):
    peer: str = _PEER
    card: list[str] | None = Field(
        default=None, max_length=50,
        description="omit to read the profile; give the complete new list of facts to replace it")


class SearchArgs(_Args):
    query: str = Field(min_length=1, max_length=2000, description="words or a question")
    max_tokens: int = Field(default=800, ge=100, le=2000, description="size budget of the answer")
    peer: str | None = Field(default=None, max_length=100,
                             description="only messages this peer wrote ('user', 'ai' or an id)")


class ContextArgs(_Args):
    peer: str = _PEER


class ConcludeArgs(_Args):
    conclusion: str | None = Field(default=None, min_length=1, max_length=2000,
                                   description="a durable fact about the peer to record")
    delete_id: str | None = Field(default=None, max_length=100,
                                  description="the id of a conclusion to delete (from list)")
    list_: bool = Field(default=False, alias="list",
                        description="list stored conclusions (with query: the most relevant)")
    query: str | None = Field(default=None, max_length=2000, description="with list: rank by this")
    peer: str = _PEER

    @model_validator(mode="after")
    def _one_action(self) -> ConcludeArgs:
        chosen = [n for n, on in (("conclusion", self.conclusion is not None),
                                  ("delete_id", self.delete_id is not None),
                                  ("list", self.list_)) if on]
        if len(chosen) != 1:
            raise ValueError("give exactly one of 'conclusion' (record), 'delete_id' (delete) or "
                             f"'list': true (list); got {', '.join(chosen) or 'none'}")
        return self


class ReasoningArgs(_Args):
    query: str = Field(min_length=1, max_length=10_000, description="a question about the peer")
    reasoning_level: ReasoningLevel | None = Field(
        default=None, description="how hard Honcho should think (default: honcho.reasoning_level)")
    peer: str = _PEER


class _Handlers:
    def __init__(self, provider: HonchoProvider) -> None:
        self.p = provider
        self.timeout = provider.config.tool_timeout

    def peer(self, value: str | None, context: ToolContext) -> str:
        user = self.p.peer_for(context.session)
        if value in (None, "", "user"):
            return user
        if value == "ai":
            return self.p.ai
        try:
            peer = check_id(value, "peer")
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        if self.p.per_user and peer not in (user, self.p.ai):
            raise ToolError(f"peer {peer!r} is not this conversation's user: with memory.scope "
                            "'user' only 'user' (this user) and 'ai' can be read")
        return peer

    def target(self, peer: str) -> str | None:
        """The card/representation target: the agent reads its own without one."""
        return None if peer == self.p.ai else peer

    def session(self, context: ToolContext) -> str | None:
        sid = self.p.session_id(context.session) if context.session is not None else None
        if sid is None and self.p.per_user:
            return None  # the last switched-to session may be another user's
        return sid or self.p.current_session

    # ----------------------------------------------------------------------------- handlers

    def profile(self, args: ProfileArgs, context: ToolContext) -> dict[str, Any]:
        peer = self.peer(args.peer, context)
        self.p.ensure_peers(self.p.peer_for(context.session))
        if args.card is not None:
            facts = [f.strip() for f in args.card if f.strip()]
            saved = self.p.client.set_card(self.p.ai, facts, target=self.target(peer),
                                           timeout=self.timeout)
            return {"peer": peer, "card": saved or [], "result": "profile replaced"}
        card = self.p.client.get_card(self.p.ai, target=self.target(peer), timeout=self.timeout)
        if not card:
            return {"peer": peer, "result": "No profile facts available yet.",
                    "hint": "record facts with honcho_conclude, or set them with card=[...]"}
        return {"peer": peer, "card": card}

    def search(self, args: SearchArgs, context: ToolContext) -> dict[str, Any]:
        peer = self.peer(args.peer, context) if args.peer else None
        budget = args.max_tokens * 4
        limit = max(3, min(20, budget // 300))
        user = self.p.peer_for(context.session)
        self.p.ensure_peers(user)
        if self.p.per_user:  # only the sessions this user is in (and, given, one author)
            filters: dict[str, Any] = {"peer_perspective": user}
            if peer is not None:
                filters["peer_id"] = peer
            found = self.p.client.search(args.query, limit=limit, filters=filters,
                                         timeout=self.timeout)
        else:
            found = self.p.client.search(args.query, limit=limit, peer=peer,
                                         timeout=self.timeout)
        lines: list[str] = []
        used = 0
        for m in found:
            snippet = " ".join(m.content.split())
            line = f"[{m.peer_id} · {m.session_id}] {snippet[:400]}"
            if used + len(line) > budget:
                break
            lines.append(line)
            used += len(line)
        if not lines:
            return {"result": "No matching messages.", "query": args.query}
        return {"query": args.query, "results": lines}

    def context(self, args: ContextArgs, context: ToolContext) -> dict[str, Any]:
        peer = self.peer(args.peer, context)
        sid = self.session(context)
        if sid is None:
            self.p.ensure_peers(self.p.peer_for(context.session))
            rep = self.p.client.representation(self.p.ai, target=self.target(peer),
                                               timeout=self.timeout)
            card = self.p.client.get_card(self.p.ai, target=self.target(peer),
                                          timeout=self.timeout)
            return {"peer": peer, "representation": rep or None, "card": card or []}
        self.p.ensure_session(sid)
        ctx = self.p.client.session_context(sid, peer_target=peer, peer_perspective=self.p.ai,
                                            tokens=2000, timeout=self.timeout)
        return {
            "peer": peer,
            "summary": ctx.summary.content if ctx.summary else None,
            "representation": ctx.peer_representation or None,
            "card": ctx.peer_card or [],
            "recent_messages": [{"peer": m.peer_id, "content": m.content[:500]}
                                for m in ctx.messages[-5:]],
        }

    def conclude(self, args: ConcludeArgs, context: ToolContext) -> dict[str, Any]:
        peer = self.peer(args.peer, context)
        sid = self.session(context)
        self.p.ensure_peers(self.p.peer_for(context.session))
        client, ai = self.p.client, self.p.ai
        if args.conclusion is not None:
            if sid is not None:
                self.p.ensure_session(sid)
            made = client.create_conclusions(
                [{"content": args.conclusion.strip(), "observer_id": ai, "observed_id": peer,
                  **({"session_id": sid} if sid else {})}], timeout=self.timeout)
            return {"stored": made[0].id if made else None, "content": args.conclusion.strip()}
        if args.delete_id is not None:
            if not ID_RE.match(args.delete_id):
                raise ToolError(f"delete_id {args.delete_id!r} is not a conclusion id; take "
                                "one from honcho_conclude(list=true)")
            if self.p.per_user and not any(c.id == args.delete_id for c in client.all_conclusions(
                    observer=ai, observed=peer, timeout=self.timeout)):  # not about this peer
                raise ToolError(f"conclusion {args.delete_id!r} is not one about {peer!r}; "
                                "take an id from honcho_conclude(list=true)")
            client.delete_conclusion(args.delete_id, timeout=self.timeout)
            return {"deleted": args.delete_id}
        if args.query:
            items = client.query_conclusions(args.query, observer=ai, observed=peer, top_k=20,
                                             timeout=self.timeout)
        else:
            items = client.list_conclusions(observer=ai, observed=peer, size=20,
                                            timeout=self.timeout).items
        return {"peer": peer, "conclusions": [
            {"id": c.id, "content": c.content, "created_at": c.created_at} for c in items]}

    def reasoning(self, args: ReasoningArgs, context: ToolContext) -> dict[str, Any]:
        peer = self.peer(args.peer, context)
        self.p.ensure_peers(self.p.peer_for(context.session))
        answer = self.p.client.chat(self.p.ai, args.query, target=self.target(peer),
                                    reasoning_level=args.reasoning_level
                                    or self.p.config.reasoning_level,
                                    timeout=self.timeout)
        if not answer:
            return {"peer": peer, "answer": None,
                    "result": "Honcho has nothing to say about that yet."}
        return {"peer": peer, "answer": answer}


def build_tools(provider: HonchoProvider) -> list[Tool]:
    """The provider's tools, bound to it."""
    h = _Handlers(provider)
    user = "the user" if provider.per_user else repr(provider.user)
    tools: list[tuple[str, str, type[BaseModel], Callable[..., Any], bool]] = [
        ("honcho_profile", f"Read the profile (peer card: short durable facts) Honcho keeps about "
         f"{user}, or replace it by giving 'card'.", ProfileArgs, h.profile, False),
        ("honcho_search", "Search what was said in earlier conversations (all sessions) by words or "
         "a question; returns '[author · session] text' lines, best first.", SearchArgs, h.search,
         True),
        ("honcho_context", f"What Honcho knows right now: this conversation's summary, its model of "
         f"{user}, the profile and the last messages.", ContextArgs, h.context, True),
        ("honcho_conclude", f"Record a durable conclusion about {user} (conclusion), delete one "
         "(delete_id), or list them (list, optionally ranked by query).", ConcludeArgs, h.conclude,
         False),
        ("honcho_reasoning", f"Ask Honcho a question about {user} (preferences, history, "
         "circumstances); it reasons over everything it has stored and answers in prose.",
         ReasoningArgs, h.reasoning, True),
    ]
    return [Tool(name=name, description=desc, input_model=model, handler=_guarded(name, handler),
                 parallel_safe=safe) for name, desc, model, handler, safe in tools]


#: what a tool was doing, for the message of its failure (honcho_profile given a card replaces it)
_DOING = {"honcho_profile": "reading the Honcho profile", "honcho_search": "searching Honcho",
          "honcho_context": "reading the Honcho context",
          "honcho_conclude": "the Honcho conclusion request", "honcho_reasoning": "asking Honcho"}


def _guarded(name: str, handler: Callable[[Any, ToolContext], dict[str, Any]]
             ) -> Callable[[Any, ToolContext], dict[str, Any]]:
    """``handler`` with a failed Honcho request turned into a tool error saying what failed."""

    def run(args: Any, context: ToolContext) -> dict[str, Any]:
        try:
            return handler(args, context)
        except HonchoError as exc:
            doing = ("replacing the Honcho profile" if getattr(args, "card", None) is not None
                     else _DOING[name])
            raise ToolError(f"{doing} failed: {exc}. Nothing was changed; you may try again "
                            "later or go on without it.") from None

    return run

