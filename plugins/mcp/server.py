"""The MCP server side: the configured memory stack as MCP tools and resources.

:class:`StackServer` wraps a loaded, activated :class:`~hermes_core.host.PluginHost`:

* tools: every tool of the active memory providers (``host.tools()``: ``memory``,
  ``session_search``, ``skills_*``, third-party ones) with their JSON schemas, plus ``recall``
  (what the providers' ``prefetch`` would inject into a turn, fenced and labelled exactly as the
  agent does; when that is nothing, the archive's search for the query, or a sentence saying why
  nothing came back: see :mod:`.recall`) and ``remember`` (one entry added to MEMORY.md through
  the ``memory`` tool);
* resources: ``hermes://memory/MEMORY.md``, ``hermes://memory/USER.md`` and one
  ``hermes://skills/<name>`` per skill (through the ``skills_list``/``skill_view`` tools);
* sessions: each client connection is a session (platform ``mcp``) the providers open and end,
  so per-session state (a user key, snapshots) has a home. The calls themselves are not archived:
  the conversation lives in the client, and a log of tool calls stored as user turns would crowd
  the user's own conversations out of every search (and each ``recall`` answer would be found
  again by the next one).

The tools of the ``mcp`` provider itself (other MCP servers' tools) are never served: a server
serving its own clients' tools could call itself.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hermes_core import threats
from hermes_core.fence import build_block
from hermes_core.kinds import Tool
from hermes_core.prefetch import PrefetchRunner
from hermes_core.toolrun import ToolRouter
from hermes_core.types import EndReason, Session, SwitchReason, ToolCall, ToolContext

from .recall import SEARCH, nothing_recalled, provider_name, search_hits

if TYPE_CHECKING:
    from hermes_core.host import PluginHost

__all__ = ["RECALL", "REMEMBER", "ServedCall", "StackServer", "connection_key"]

log = logging.getLogger("hermes_core.plugins.mcp")

RECALL = "recall"
REMEMBER = "remember"
PLATFORM = "mcp"
#: the instance whose tools are other servers' tools (never served back)
CLIENT_INSTANCE = "memory-provider:mcp"
#: the most characters a call's arguments may hold (as JSON); larger calls are refused unrun and
#: unrun (no served tool needs more: a memory entry holds ~2,000, a query a few hundred)
MAX_ARGUMENTS = 100_000

#: resource file name -> the file memory's target
_DOCUMENTS = {"MEMORY.md": "memory", "USER.md": "user"}


def _one_text(key: str, description: str) -> dict[str, Any]:
    """The input schema of a tool that takes one non-empty string, ``key``."""
    return {"type": "object",
            "properties": {key: {"type": "string", "minLength": 1, "description": description}},
            "required": [key], "additionalProperties": False}


_RECALL_SCHEMA = _one_text("query", "What the user said or asked: what to recall for.")
_REMEMBER_SCHEMA = _one_text("text", "One durable fact to keep (a line of MEMORY.md).")


@dataclass
class ServedCall:
    """The answer to one ``tools/call``."""

    text: str
    is_error: bool = False


@dataclass
class _Conversation:
    session: Session
    #: ``time.monotonic()`` of the last call on this connection
    last_used: float = field(default_factory=time.monotonic)


def connection_key(transport: str, request: Any, meta: Any) -> str:
    """Which client connection a request belongs to.

    stdio: the process serves one connection. HTTP: the ``mcp-session-id`` of a stateful session,
    or, for stateless (2026-07-28) clients, the client's name and its TCP connection.
    """
    if transport == "stdio" or request is None:
        return "stdio"
    headers = getattr(request, "headers", None) or {}
    sid = headers.get("mcp-session-id")
    if sid:
        return f"http-session:{sid}"
    client = getattr(request, "client", None)
    peer = f"{client.host}:{client.port}" if client is not None else "?"
    info = (meta or {}).get("io.modelcontextprotocol/clientInfo") if isinstance(meta, dict) else None
    name = info.get("name") if isinstance(info, dict) else None
    return f"http:{name or 'client'}@{peer}"


class StackServer:
    """The stack behind the MCP handlers (sync: the async layer calls it in worker threads)."""

    def __init__(self, host: PluginHost, *, transport: str, max_conversations: int = 500) -> None:
        self.host = host
        #: the most connections with an open archive session (the least recently used is ended)
        self.max_conversations = max_conversations
        self.transport = transport
        self.tools: dict[str, tuple[Tool, str]] = {
            name: entry for name, entry in host.tools().items() if entry[1] != CLIENT_INSTANCE}
        for reserved in (RECALL, REMEMBER):
            if reserved in self.tools:
                raise ValueError(f"plugin {self.tools[reserved][1]!r} offers a tool named "
                                 f"{reserved!r}, which the MCP server reserves; disable one of them")
        self.router = ToolRouter(self.tools, timeout=host.config.core.hooks.tool_timeout)
        self._validators: dict[str, Any] = {}
        self.prefetch = PrefetchRunner(host, timeout=host.config.core.memory.prefetch_timeout)
        self._conversations: dict[str, _Conversation] = {}
        self._lock = threading.Lock()

    # --------------------------------------------------------------------------------- listing

    def list_tools(self) -> list[dict[str, Any]]:
        out = [{"name": name, "description": tool.description, "input_schema": tool.input_schema()}
               for name, (tool, _plugin) in sorted(self.tools.items())]
        out.append({"name": RECALL, "input_schema": _RECALL_SCHEMA, "description":
                    "What the memory recalls for a message: the fenced <memory-context> "
                    "block the agent adds to a turn (one labelled part per provider), else the "
                    "archive's best matching earlier conversations, else why nothing matched."})
        if "memory" in self.tools:
            out.append({"name": REMEMBER, "input_schema": _REMEMBER_SCHEMA, "description":
                        "Keep one durable fact in MEMORY.md (the agent's own notes)."})
        return out

    # --------------------------------------------------------------------------------- calling

    def session_for(self, key: str, client_name: str | None = None) -> Session:
        crowded: list[_Conversation] = []
        with self._lock:
            conv = self._conversations.pop(key, None)
            if conv is not None:
                conv.last_used = time.monotonic()
                self._conversations[key] = conv  # most recently used last
                return conv.session
            from hermes_core.agent import new_session_id

            attributes: dict[str, Any] = {"transport": self.transport}
            if client_name:
                attributes["client"] = client_name
            session = Session(id=new_session_id(), platform=PLATFORM, title=None,
                              model=None, attributes=attributes)
            self._conversations[key] = _Conversation(session)
            while len(self._conversations) > self.max_conversations:
                crowded.append(self._conversations.pop(next(iter(self._conversations))))
        self._end(crowded, EndReason.EXPIRED)
        for outcome in self.host.hooks.on_session_switch(new_session=session, old_session=None,
                                                         reason=SwitchReason.NEW):
            if outcome.error is not None:
                log.error("%s failed to open MCP session %s: %s", outcome.plugin, session.id,
                          outcome.error)
        return session

    def end(self, key: str) -> bool:
        """End the archive session of a connection the client closed; False if it had none."""
        with self._lock:
            conv = self._conversations.pop(key, None)
        self._end([conv] if conv is not None else [], EndReason.USER_EXIT)
        return conv is not None

    def expire_idle(self, max_idle: float) -> int:
        """End the sessions of connections without a call for ``max_idle`` seconds; how many."""
        cutoff = time.monotonic() - max_idle
        with self._lock:
            idle = [k for k, c in self._conversations.items() if c.last_used <= cutoff]
            expired = [self._conversations.pop(k) for k in idle]
        self._end(expired, EndReason.EXPIRED)
        return len(expired)

    def _end(self, conversations: list[_Conversation], reason: EndReason) -> None:
        for conv in conversations:
            for outcome in self.host.hooks.on_session_end(session=conv.session, messages=[],
                                                          reason=reason):
                if outcome.error is not None:
                    log.error("%s failed to end MCP session %s: %s", outcome.plugin,
                              conv.session.id, outcome.error)

    def serve(self, key: str, client_name: str | None, name: str,
              arguments: dict[str, Any] | None) -> ServedCall:
        """One client call on the handler's worker thread: the connection's session, then the
        call (one hop from the event loop; the caller bounds it by :meth:`deadline`)."""
        return self.call(name, arguments, self.session_for(key, client_name))

    def deadline(self, name: str) -> float:
        """Seconds a call of tool ``name`` may take before the client gets :meth:`late`'s answer:
        ``hooks.tool_timeout``, plus ``memory.prefetch_timeout`` for ``recall``."""
        if name == RECALL:
            return self.router.timeout + self.prefetch.timeout
        return self.router.timeout

    def late(self, name: str, seconds: float) -> ServedCall:
        """The answer to a call abandoned at its deadline (it may still finish in the background)."""
        log.error("MCP tool %s did not finish within %g s (hooks.tool_timeout); the client got "
                  "an error answer", name, seconds)
        return ServedCall(f"Error: tool {name!r} did not finish within {seconds:g} s and was "
                          "abandoned; it may still complete in the background. Do not assume "
                          "it ran.", is_error=True)

    def call(self, name: str, arguments: dict[str, Any] | None, session: Session) -> ServedCall:
        """Run one tool call and record it (call and answer) in the session. An unknown tool
        raises ``LookupError``; bad arguments and tool failures are error answers."""
        args = arguments or {}
        if name not in self.tools and name not in (RECALL, REMEMBER):
            raise LookupError(f"unknown tool {name!r}; this server offers: "
                              + ", ".join(t["name"] for t in self.list_tools()))
        problem = self._check_arguments(name, args)
        if problem is not None:
            return ServedCall(problem, is_error=True)
        size = len(json.dumps(args, ensure_ascii=False))
        if size > MAX_ARGUMENTS:
            return ServedCall(f"the arguments of tool {name!r} hold {size:,} characters; the limit "
                              f"is {MAX_ARGUMENTS:,}: send less (nothing was run or stored)",
                              is_error=True)
        from hermes_core.embeddings import turn_in_flight  # not at import: the module is lazy

        # a served call is a turn to the background embedding (an archive filling in its
        # vectors): it waits between slices as it does for the agent's turns, instead of sharing
        # the two cores and the interpreter with every call (docs/mcp.md)
        try:
            with turn_in_flight():
                if name == RECALL:
                    answer = ServedCall(self.recall(str(args["query"]), session))
                elif name == REMEMBER:
                    answer = self._remember(str(args["text"]), session)
                else:
                    answer = self._run(name, args, session)
        except Exception as exc:  # recall's or remember's failure is an answer, not the server's end
            from hermes_core.errors import ToolError

            detail = str(exc) if isinstance(exc, ToolError) else f"{type(exc).__name__}: {exc}"
            answer = ServedCall(f"tool {name!r} failed: {detail}", is_error=True)
        return answer

    def recall(self, query: str, session: Session) -> str:
        """What ``prefetch`` gives for ``query``, fenced as the agent fences it; else the search
        tool's hits, fenced the same way; else why nothing came back (see :mod:`.recall`)."""
        results = self.prefetch.run(query, session)
        block = build_block([(r.provider, r.text) for r in results])
        if block:
            return block
        if SEARCH not in self.tools:
            return nothing_recalled(results, searched=None)

        tool, plugin = self.tools[SEARCH]
        context = ToolContext(session=session, plugin_name=plugin)

        def search(args: dict[str, Any]) -> dict[str, Any]:
            # on this (the handler's worker) thread, not through the router's thread per call:
            # a fresh thread for every recall had glibc open arenas that stay resident (issue 33)
            found: dict[str, Any] = json.loads(tool.invoke(args, context))
            return found

        try:
            hits = search_hits(search, query)
        except Exception as exc:  # the archive's failure is a reason, not the answer's end
            return nothing_recalled(results, searched=f"{SEARCH} failed: {exc}")
        if hits.text:
            return build_block([(f"{provider_name(self.tools[SEARCH][1])} ({SEARCH})", hits.text)])
        return nothing_recalled(results, searched=hits.why)

    def _remember(self, text: str, session: Session) -> ServedCall:
        entry = self.tools.get("memory")
        if entry is None:
            return ServedCall("remember needs the file memory's 'memory' tool: add file_memory to "
                              "memory.providers", is_error=True)
        return self._run("memory", {"action": "add", "target": "memory", "content": text}, session)

    def _run(self, name: str, args: dict[str, Any], session: Session) -> ServedCall:
        """Run a stack tool as the agent does: routed to its plugin, its failure an error
        answer (bounded by ``hooks.tool_timeout`` in the async layer: :meth:`deadline`)."""
        call = ToolCall(id=f"mcp-{uuid.uuid4().hex[:16]}", name=name, arguments=args)
        # on this (the handler's worker) thread: the async layer bounds the call, and a fresh
        # thread per call cost a scheduling round trip and opened glibc arenas (issue 33)
        outcome = self.router.run_one(call, session, here=True)
        answer = ServedCall(outcome.content, is_error=outcome.is_error)
        # a tool that refuses with {"success": false, ...} (the memory tool) answers an error:
        # the client must not take a refused write for a stored one
        with contextlib.suppress(ValueError, AttributeError):
            answer.is_error = answer.is_error or json.loads(answer.text).get("success") is False
        return answer

    def _check_arguments(self, name: str, args: dict[str, Any]) -> str | None:
        """A message naming the tool and the first schema violation, or ``None``."""
        if not isinstance(args, dict):
            return f"arguments for tool {name!r} must be a JSON object; nothing was changed"
        validator = self._validators.get(name)
        if validator is None:
            schema = next(t["input_schema"] for t in self.list_tools() if t["name"] == name)
            try:
                import jsonschema
            except ImportError:
                return None
            validator = jsonschema.validators.validator_for(schema)(schema)
            self._validators[name] = validator
        errors = sorted(validator.iter_errors(args), key=lambda e: list(e.path))
        if not errors:
            return None
        where = "/".join(str(p) for p in errors[0].path) or "(arguments)"
        return (f"invalid arguments for tool {name!r} at {where}: {errors[0].message}; nothing was "
                "changed")

    # ------------------------------------------------------------------------------- resources

    def _memory_document(self, fname: str) -> str | None:
        """MEMORY.md / USER.md as the file memory keeps them (the home's files, or the
        ``storage.url`` database), or None when it is not active or the document is empty.

        Read through the provider's own store (``store_for``: the shared memory, as for the
        ``memory`` tool of a connection without a user key), never from a path in the home: with
        ``storage.url`` a file left in the home is stale, and may hold what was since forgotten.
        """
        provider = self.tools["memory"][1] if "memory" in self.tools else None
        instance = self.host.instances.get(provider) if provider else None
        store_for = getattr(instance, "store_for", None)
        if store_for is None:
            return None
        state = store_for(None).read(_DOCUMENTS[fname])
        if state.problem is not None:
            raise LookupError(f"{fname} cannot be read: {state.problem}")
        if not state.raw:
            return None
        text: str = state.raw.decode("utf-8", errors="replace")
        # what the system prompt withholds (an entry edited in by hand that the threat scan
        # refuses), a client reading the document does not get either
        for entry in state.entries:
            finding = threats.scan(entry)
            if finding is not None:
                text = text.replace(entry, f"[withheld: this {fname} entry matched threat pattern "
                                           f"{finding.pattern} ({finding.category})]")
        return text

    def list_resources(self) -> list[dict[str, str]]:
        out = []
        for fname, what in (("MEMORY.md", "the agent's notes"), ("USER.md", "what is known of the user")):
            try:
                present = self._memory_document(fname) is not None
            except LookupError:
                present = True  # listed: reading it says what is wrong
            if present:
                out.append({"uri": f"hermes://memory/{fname}", "name": fname,
                            "description": f"Curated memory: {what}", "mime_type": "text/markdown"})
        for skill in self._skills():
            name = str(skill.get("name"))
            out.append({"uri": f"hermes://skills/{name}", "name": f"skill {name}",
                        "description": str(skill.get("description") or ""),
                        "mime_type": "text/markdown"})
        return out

    def read_resource(self, uri: str) -> str:
        prefix_mem, prefix_skill = "hermes://memory/", "hermes://skills/"
        if uri in (f"{prefix_mem}MEMORY.md", f"{prefix_mem}USER.md"):
            text = self._memory_document(uri[len(prefix_mem):])
            if text is None:
                raise LookupError(f"resource {uri!r} does not exist yet (nothing saved)")
            return text
        if uri.startswith(prefix_skill) and "skill_view" in self.tools:
            tool, plugin = self.tools["skill_view"]
            out = json.loads(tool.invoke({"name": uri[len(prefix_skill):]},
                                         ToolContext(plugin_name=plugin)))
            if isinstance(out, dict) and out.get("body") is not None:
                return str(out["body"])
        raise LookupError(f"unknown resource {uri!r}; list them with resources/list")

    def _skills(self) -> list[dict[str, Any]]:
        if "skills_list" not in self.tools:
            return []
        tool, plugin = self.tools["skills_list"]
        try:
            data = json.loads(tool.invoke({}, ToolContext(plugin_name=plugin)))
        except Exception as exc:
            log.error("skills_list failed while listing MCP resources: %s", exc)
            return []
        return [s for s in data.get("skills", []) if isinstance(s, dict)]

    # ----------------------------------------------------------------------------------- close

    def close(self) -> None:
        """End every connection's session (reason ``shutdown``) and stop the prefetch lanes."""
        with self._lock:
            conversations, self._conversations = list(self._conversations.values()), {}
        self._end(conversations, EndReason.SHUTDOWN)
        self.prefetch.close()

