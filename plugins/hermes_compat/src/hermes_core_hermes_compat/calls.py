"""Where a Hermes plugin's calls run: its own Hermes home inside the hermes-core home.

Each Hermes provider gets ``<hermes-core home>/hermes-compat/<plugin>/`` (and, under
``memory.scope: user``, ``.../users/<key>/`` per user) as its ``hermes_home``. Around every call
the bridge sets that folder as the answer of the stand-in ``hermes_constants.get_hermes_home()``
(a context variable, so two providers on two threads each see their own). ``HERMES_HOME`` is a
process-wide variable, so it is pointed at the common parent ``<home>/hermes-compat/`` when the
first plugin initialises: a plugin (or its own background thread) reading it directly stays
inside the hermes-core home too.

:class:`Pinned` runs every call into one Hermes provider object on one thread of its own. Hermes
calls a provider from its agent's thread, so published providers keep thread-bound state (a
SQLite connection per thread, whose open write then locks out the connection of the kernel's
background lane: "database is locked"). The kernel calls hooks from several lanes; the adapter
hands each call to the object's own thread and waits for it there, so the kernel's deadline
still bounds the wait and a hung call costs the turn one deadline, never more.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import os
import queue
import re
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from . import shims

__all__ = ["COMPAT_DIR", "Pinned", "compat_root", "hermes_home_for", "in_home", "point_env"]

COMPAT_DIR = "hermes-compat"

T = TypeVar("T")


def compat_root(home: Path) -> Path:
    return home / COMPAT_DIR


def hermes_home_for(home: Path, plugin: str, user_key: str | None) -> Path:
    base = compat_root(home) / re.sub(r"[^A-Za-z0-9_.-]+", "_", plugin)
    if user_key is None:
        return base
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", user_key)[:40]
    digest = hashlib.sha256(user_key.encode("utf-8")).hexdigest()[:10]
    return base / "users" / f"{safe}-{digest}"


def point_env(home: Path) -> None:
    """Point ``HERMES_HOME`` at the bridge's folder of ``home`` (process-wide)."""
    os.environ["HERMES_HOME"] = str(compat_root(home))


@contextlib.contextmanager
def in_home(path: Path) -> Iterator[None]:
    """Run a call with ``path`` as the stand-in ``get_hermes_home()`` answer."""
    module = sys.modules.get("hermes_constants")
    if module is None and shims.installed():
        module = importlib.import_module("hermes_constants")
    var = getattr(module, "home_override", None)
    if var is None:  # real hermes-agent: it reads HERMES_HOME (pointed at the bridge's folder)
        yield
        return
    token = var.set(str(path))
    try:
        yield
    finally:
        var.reset(token)


_Call = tuple[Callable[[], Any], "Future[Any]"]


class _Wake:
    """Put on an object's queue when the call its thread waits for is done."""


class Pinned:
    """One daemon thread running, in order, every call into one Hermes object, each with
    ``home`` as its Hermes home. The caller waits for the result without a bound of its own:
    the kernel's deadline bounds the caller, and a hung call keeps only this thread (a daemon:
    it never holds the process at exit)."""

    def __init__(self, name: str, home: Path) -> None:
        self.name = name
        self.home = home
        self._queue: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        #: on this object's thread: the queue it serves
        self._local = threading.local()

    def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        if threading.current_thread() is self._thread:  # a call made from inside a call
            with in_home(self.home):
                return fn(*args, **kwargs)
        return self.submit(fn, *args, **kwargs).result()

    def serve_until(self, done: Future[Any]) -> None:
        """Wait for ``done``; on this object's thread, run the calls handed to it meanwhile (a
        plugin waiting in ``ctx.dispatch_tool`` for a tool whose guard hooks, or which itself,
        call into the plugin), so the wait never deadlocks on the thread it holds."""
        calls: queue.SimpleQueue[Any] | None = getattr(self._local, "calls", None)
        if calls is None:
            done.exception()
            return
        wake, others = _Wake(), list[Any]()
        done.add_done_callback(lambda _f: calls.put(wake))
        while (item := calls.get()) is not wake:
            if item is None:  # closed meanwhile: the thread's own loop ends after this call
                others.append(item)
                done.exception()
                break
            if isinstance(item, _Wake):  # an outer wait's: its turn comes once this one returns
                others.append(item)
                continue
            self._one(item)
        for item in others:
            calls.put(item)

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Hand ``fn(*args, **kwargs)`` to the thread; its future, not waited for."""
        future: Future[T] = Future()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, args=(self._queue,),
                                                name=self.name, daemon=True)
                self._thread.start()
            self._queue.put((functools.partial(fn, *args, **kwargs), future))
        return future

    def _serve(self, calls: queue.SimpleQueue[_Call | None]) -> None:
        self._local.calls = calls
        while (item := calls.get()) is not None:
            self._one(item)

    def _one(self, item: _Call) -> None:
        call, future = item
        if not future.set_running_or_notify_cancel():
            return
        try:
            with in_home(self.home):
                value = call()
        except BaseException as exc:  # a plugin's SystemExit is its call's error too
            future.set_exception(exc)
        else:
            future.set_result(value)

    def close(self) -> None:
        """Let the thread end once the calls already handed to it are done."""
        with self._lock:
            if self._thread is not None:
                self._queue.put(None)
                self._queue = queue.SimpleQueue()
                self._thread = None
