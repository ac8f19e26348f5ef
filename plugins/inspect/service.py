"""What the inspector can do, as plain calls on a loaded host (no HTTP here).

Every operation is a call into a library the CLI uses too: the file memory's store and history
(through the public methods of its provider instance: ``describe``, ``edit``, ``rollback``,
``diff``, ``pin``, ``unpin``), the session archive's :class:`SessionArchive` (``list_sessions``,
``show``, ``lineage``), the ``session_search`` tool (the agent's hybrid search), the kernel's
:class:`~hermes_core.prefetch.PrefetchRunner` and fence (recall), ``forget``'s
:func:`~hermes_core.cli.forget_cmd.run_forget` and ``doctor``'s checks. The providers are found by
what they offer, never by importing them.

``user`` is a user key or ``None`` (the shared memory / every session); the HTTP layer decides
which a caller may ask for.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from hermes_core.errors import HermesCoreError
from hermes_core.fence import build_block
from hermes_core.prefetch import PrefetchRunner
from hermes_core.toolrun import ToolRouter
from hermes_core.types import Session, ToolCall

from .evalruns import EVAL_DIR, list_runs, read_run

if TYPE_CHECKING:
    from hermes_core.host import PluginHost

__all__ = ["MAX_QUERY", "Conflict", "Inspector", "NotFound", "Unavailable"]

#: the longest search or recall query accepted (characters)
MAX_QUERY = 2000
#: what every write made from the page is recorded as (the history's origin)
ORIGIN = "inspect"
TARGETS = ("memory", "user")
SEARCH_TOOL = "session_search"


class NotFound(HermesCoreError):
    """What was asked for does not exist (or is another user's)."""


class Conflict(HermesCoreError):
    """The memory changed since the version the caller saw; nothing was changed."""


class Unavailable(HermesCoreError):
    """The provider an operation needs is not active; the message says how to turn it on."""


class Inspector:
    """The operations of ``hermes-core inspect`` over one host (thread-safe where it matters:
    the stores and the archive lock themselves; the inspector keeps no state of its own but
    the prefetch lanes)."""

    def __init__(self, host: PluginHost) -> None:
        self.host = host
        providers = host.providers()
        #: the provider with the MEMORY.md/USER.md surface (the file memory), if active
        self.memory: Any = next((p for p in providers.values()
                            if all(hasattr(p, a) for a in ("describe", "edit", "rollback",
                                                           "user_store"))), None)
        #: the session archive provider (its ``archive``), if active
        self.sessions: Any = next((p for p in providers.values()
                              if hasattr(getattr(type(p), "archive", None), "fget")), None)
        self.tools = host.tools()
        self.router = ToolRouter(self.tools, timeout=host.config.core.hooks.tool_timeout)
        self.recall_timeout = host.config.core.memory.prefetch_timeout
        #: memory.scope: user, under which search and recall see one user's sessions only
        self.per_user = host.config.core.memory.scope == "user"
        #: the recall of the whole home (``user`` None); each user key has a runner of its own
        #: (:meth:`runner`): a late provider's last answer is never another user's
        self.prefetch = PrefetchRunner(host, timeout=self.recall_timeout)
        self._runners: dict[str, PrefetchRunner] = {}
        self._runners_lock = threading.Lock()
        self.started = time.time()
        self._write_lock = threading.Lock()
        #: per provider, the recalls run from the inspector since it started
        self._timings: dict[str, dict[str, float]] = {}

    def close(self) -> None:
        for runner in self._all_runners():
            runner.close()

    def runner(self, user: str | None) -> PrefetchRunner:
        """The prefetch runner of ``user``'s recalls (None: the whole home's). A runner serves a
        late provider's last answer (``stale``), as in a conversation: one per user key, so
        that answer is always one made for the same caller's scope."""
        if user is None:
            return self.prefetch
        with self._runners_lock:
            runner = self._runners.get(user)
            if runner is None:
                runner = self._runners[user] = PrefetchRunner(self.host,
                                                              timeout=self.recall_timeout)
            return runner

    def _all_runners(self) -> list[PrefetchRunner]:
        with self._runners_lock:
            return [self.prefetch, *self._runners.values()]

    # -------------------------------------------------------------------------------- eval

    def eval_runs(self) -> list[dict[str, Any]]:
        """The eval reports in the home's ``eval/`` folder, newest first."""
        return list_runs(self.host.home / EVAL_DIR)

    def eval_run(self, name: str) -> dict[str, Any]:
        """One report's figures per question type and k, and per question."""
        try:
            return read_run(self.host.home / EVAL_DIR, name)
        except LookupError as exc:
            raise NotFound(str(exc)) from None

    # ------------------------------------------------------------------------------ memory

    def _memory(self) -> Any:
        if self.memory is None:
            raise Unavailable("no active provider keeps MEMORY.md/USER.md: add file_memory to "
                              "memory.providers in config.yaml")
        return self.memory

    def _store(self, user: str | None) -> Any:
        memory = self._memory()
        return memory.store if user is None else memory.user_store(user)

    def memory_state(self, user: str | None) -> dict[str, Any]:
        state: dict[str, Any] = self._memory().describe(self._store(user))
        return {"user": user, **state}

    def _check_version(self, store: Any, expected: int | None) -> None:
        if expected is None:
            return
        now = self._memory().describe(store)["version"]
        if now != expected:
            raise Conflict(f"the memory changed since version {expected}: it is now at version "
                           f"{now} (another edit, e.g. from the CLI or the agent, came first); "
                           "nothing was changed: reload and try again")

    def edit(self, user: str | None, action: str, target: str, *, content: str = "",
             old_text: str = "", expected_version: int | None = None) -> dict[str, Any]:
        memory = self._memory()
        store = self._store(user)
        with self._write_lock:  # the check and the write of this server's edits are one step
            self._check_version(store, expected_version)
            result: dict[str, Any] = memory.edit(store, action, target, content=content,
                                                 old_text=old_text, origin=ORIGIN)
        result["version"] = memory.describe(store)["version"]
        return result

    def history(self, user: str | None) -> list[dict[str, Any]]:
        store = self._store(user)
        if store.history is None:
            return []
        return [v.to_dict(stores=False) for v in store.history.read()]

    def diff(self, user: str | None, version: int, other: int | None) -> list[dict[str, Any]]:
        store = self._store(user)
        self._known(store, version)
        if other is not None:
            self._known(store, other)
        out: list[dict[str, Any]] = self._memory().diff(store, version, other)
        return out

    def _known(self, store: Any, number: int) -> None:
        held = [v.version for v in store.history.read()] if store.history is not None else []
        if number not in held:
            span = f"versions {held[0]}..{held[-1]}" if held else "no version yet"
            raise NotFound(f"there is no version {number} in this memory's history (it holds "
                           f"{span}); pick one from the history")

    def rollback(self, user: str | None, version: int, expected_version: int | None
                 ) -> dict[str, Any]:
        memory = self._memory()
        store = self._store(user)
        self._known(store, version)
        with self._write_lock:
            self._check_version(store, expected_version)
            result: dict[str, Any] = memory.rollback(store, version, origin=ORIGIN)
        return result

    def pin(self, user: str | None, target: str, text: str, on: bool) -> dict[str, Any]:
        memory = self._memory()
        store = self._store(user)
        if on:
            return {"pinned": [memory.pin(store, target, text)]}
        return {"unpinned": memory.unpin(store, target, text)}

    # ---------------------------------------------------------------------------- sessions

    def _archive(self) -> Any:
        if self.sessions is None:
            raise Unavailable("the session archive is not active: add session_archive to "
                              "memory.providers in config.yaml")
        return self.sessions.archive

    def list_sessions(self, user: str | None, limit: int, offset: int) -> list[dict[str, Any]]:
        records = self._archive().list_sessions(limit=limit, offset=offset, chains=False,
                                                user=user)
        return [r.to_dict() for r in records]

    def list_facts(self, user: str | None, limit: int) -> list[dict[str, Any]]:
        """Derived memory of the archive (``session_archive.derive``), newest first."""
        facts: list[dict[str, Any]] = self._archive().facts(user=user, all_users=user is None,
                                                            limit=limit)
        return facts

    def show_session(self, user: str | None, session_id: str, offset: int, limit: int
                     ) -> dict[str, Any]:
        archive = self._archive()
        missing = NotFound(f"no session {session_id!r}" + (f" of user {user!r}" if user else "")
                           + ": the sessions list shows the ids")
        if not archive.has_session(session_id):
            raise missing
        data: dict[str, Any] = archive.show(session_id)
        owner = (data["session"].get("attributes") or {}).get("user_id") or ""
        if user is not None and owner != user:
            raise missing  # another user's session: as if it did not exist
        messages = data["messages"]
        data["message_count"] = len(messages)
        data["messages"] = messages[offset: offset + limit]
        data["lineage"] = archive.lineage(session_id)
        return data

    def search(self, user: str | None, query: str) -> dict[str, Any]:
        _check_query(query)
        if SEARCH_TOOL not in self.tools:
            raise Unavailable("no active provider offers session_search: add session_archive "
                              "to memory.providers in config.yaml")
        call = ToolCall(id=f"inspect-{uuid.uuid4().hex[:12]}", name=SEARCH_TOOL,
                        arguments={"query": query})
        outcome = self.router.run_one(call, self._session(user))
        try:
            answer: dict[str, Any] = json.loads(outcome.content)
        except ValueError:
            answer = {"error": outcome.content}
        if outcome.is_error or answer.get("success") is False or "error" in answer:
            raise HermesCoreError(str(answer.get("error") or outcome.content))
        return answer

    def _session(self, user: str | None) -> Session:
        attributes: dict[str, Any] = {"user_id": user} if user else {}
        return Session(id=f"inspect-{uuid.uuid4().hex[:12]}", platform="inspect",
                       attributes=attributes)

    # ------------------------------------------------------------------------------ recall

    def recall(self, user: str | None, query: str) -> dict[str, Any]:
        """What the active providers' ``prefetch`` gives for ``query``, each with its timing,
        and the block the model would see (fenced as the agent fences it)."""
        _check_query(query)
        started = time.perf_counter()
        results = self.runner(user).run(query, self._session(user))
        with self._write_lock:
            for r in results:
                row = self._timings.setdefault(r.provider, {"calls": 0, "late": 0, "errors": 0,
                                                            "max_seconds": 0.0})
                row["calls"] += 1
                row["late"] += r.status == "stale"
                row["errors"] += r.status == "error"
                row["max_seconds"] = max(row["max_seconds"], r.seconds or 0.0)
        return {
            "query": query, "timeout_seconds": self.recall_timeout,
            "seconds": round(time.perf_counter() - started, 4),
            "providers": [{"provider": r.provider, "status": r.status, "text": r.text,
                           "seconds": r.seconds, "error": r.error} for r in results],
            "block": build_block([(r.provider, r.text) for r in results]),
        }

    # ------------------------------------------------------------------ providers, doctor

    def providers(self) -> dict[str, Any]:
        records = [{"name": r.name, "source": r.source, "version": r.version,
                    "enabled": r.enabled, "kinds": r.kinds, "error": r.error,
                    "warnings": list(r.warnings)} for r in self.host.records.values()]
        active = [{"name": self.host.instance_name(k), "kind": self.host.kind_of(k)}
                  for k in self.host.instances]
        return {"plugins": records, "active": active,
                "memory_providers": list(self.host.config.core.memory.providers),
                "context_engine": self.host.config.core.context.engine,
                "prefetch_timeout": self.recall_timeout,
                "problem_count": self.host.hooks.problem_count,
                "problems_by_plugin": self._problem_counts(),
                "problems": [f"{p.plugin} {p.hook} {p.status}: {p.message}"
                             for p in list(self.host.hooks.problems)[-50:]],
                "recall_timings": {name: dict(t) for name, t in self._timings.items()},
                "started_at": self.started}

    def _problem_counts(self) -> dict[str, dict[str, int]]:
        """Per plugin: how many of its hook calls failed or were late, by status."""
        out: dict[str, dict[str, int]] = {}
        for problem in list(self.host.hooks.problems):
            name = self.host.instance_name(problem.plugin)
            row = out.setdefault(name, {})
            key = f"{problem.hook}:{problem.status}"
            row[key] = row.get(key, 0) + 1
        return out

    def doctor(self) -> list[dict[str, Any]]:
        from hermes_core.cli.doctor_cmd import run_checks

        return run_checks()

    # ------------------------------------------------------------------------------ forget

    def forget(self, user: str | None, subject: str, *, dry_run: bool, confirm: bool,
               force: bool) -> dict[str, Any]:
        """``forget``'s dry-run preview, or (with ``confirm``) the deletion itself; the subject
        rules (empty, too short, too broad) are forget's own."""
        from hermes_core.cli.forget_cmd import run_forget

        if not dry_run and not confirm:
            raise HermesCoreError("forgetting deletes for good: preview it first (dry_run: true), "
                                  "then send confirm: true to delete")
        scope = "all" if user is None else f"user:{user}"
        out: dict[str, Any] = run_forget(subject, dry_run=dry_run, scope=scope, force=force)
        for runner in self._all_runners():  # no recall made before the erasure is shown after
            runner.forget()
        return out


def _check_query(query: str) -> None:
    if not query.strip():
        raise HermesCoreError("the query is empty: type a few words to look for")
    if len(query) > MAX_QUERY:
        raise HermesCoreError(f"the query holds {len(query):,} characters; at most {MAX_QUERY:,} "
                              "are searched: shorten it")
