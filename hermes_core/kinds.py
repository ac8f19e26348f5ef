"""The things plugins register: base classes for each kind, and :class:`Tool`.

A class registered through ``register_memory_providers``, ``register_context_engines``,
``register_platforms`` or ``register_embedders`` needs only two class attributes: ``name`` and,
optionally, ``Config`` (a pydantic model). Subclassing :class:`MemoryProvider`,
:class:`ContextEngine`, :class:`Platform` or :class:`Embedder` is a convenience: it supplies an
empty ``Config`` and the constructor the kernel calls.
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from ._markers import PROJECT_NAME
from .errors import LLMError, LLMFailure, ToolError
from .types import MemoryWrite, ToolContext

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ._noconfig import NoConfig
    from .config import CoreConfig
    from .embeddings import GuardedEmbedder
    from .types import LLMResponse, Message, Session

__all__ = [
    "CURATION_ROLES",
    "ContextEngine",
    "Curation",
    "DeferredConfig",
    "Embedder",
    "EmbedderUnavailable",
    "LLMClient",
    "MemoryProvider",
    "NoConfig",
    "Platform",
    "PluginContext",
    "Tool",
]

#: Anthropic's (and most providers') rule for tool names.
TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
#: Names of registered classes: used as config keys and in ``memory.providers``.
KIND_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


def __getattr__(name: str) -> Any:
    # pydantic (about half of the kernel's import time) comes with the first config model asked
    # for, not with the kernel: ``NoConfig`` lives in a module of its own.
    if name == "NoConfig":
        return _no_config()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_NO_CONFIG: Any = object()


def _no_config() -> type[NoConfig]:
    from ._noconfig import NoConfig

    return NoConfig


def config_model(cls: type) -> type[BaseModel]:
    """The config model of a registered class: its ``Config``, or :class:`NoConfig` if it has none
    (what a class sets is returned as it is: the registry refuses a ``Config`` that is no model)."""
    model: type[BaseModel] = getattr(cls, "Config", _NO_CONFIG)
    return _no_config() if model is _NO_CONFIG else model


class DeferredConfig:
    """A ``Config`` imported when it is first read, not when the plugin's module is:
    ``Config = DeferredConfig("my_plugin.config", "MyConfig")`` in a registered class. The kernel
    reads ``Config`` when it validates the class's section, so a plugin whose module is imported
    (``plugins list``, ``--help``, a library user) pays for pydantic only when a config is."""

    __slots__ = ("attribute", "module")

    def __init__(self, module: str, attribute: str) -> None:
        self.module = module
        self.attribute = attribute

    def __get__(self, instance: object, owner: type | None = None) -> type[BaseModel]:
        try:
            model: type[BaseModel] = getattr(importlib.import_module(self.module), self.attribute)
        except (ImportError, AttributeError) as exc:
            # never an AttributeError: getattr(cls, "Config", default) would hide it
            from .errors import RegistryError

            where = owner.__qualname__ if owner is not None else "a class"
            raise RegistryError(
                f"{where}.Config = {self!r} cannot be imported ({type(exc).__name__}: {exc}); "
                "name an importable module and the model class it defines") from exc
        return model

    def __repr__(self) -> str:
        return f"DeferredConfig({self.module!r}, {self.attribute!r})"


#: what ``PluginContext.run_later`` queues: work the host drains, or work it may drop
RunKind = Literal["write", "disposable"]


class RunLater(Protocol):
    """The signature of :attr:`PluginContext.run_later`."""

    def __call__(self, fn: Callable[[], None], label: str, *, kind: RunKind = "write",
                 session: Session | None = None) -> bool: ...


@dataclass(slots=True)
class PluginContext:
    """What the kernel hands an instance besides its own config."""

    #: the name of the plugin (entry point, directory or built-in module) that registered the class
    plugin_name: str
    #: ``$HERMES_CORE_HOME``
    home: Path
    #: the whole validated configuration, read-only by convention
    config: CoreConfig
    logger: logging.Logger
    #: mirror a successful write of this provider's store to the other providers
    notify_memory_write: Callable[[MemoryWrite], None] = field(default=lambda write: None)
    #: the embedder ``embeddings.embedder`` selects, guarded (hermes_core.embeddings), built on
    #: first call; None when semantic search is off or no embedder is installed
    embedder: Callable[[], GuardedEmbedder | None] = field(default=lambda: None)
    #: tell the kernel about a problem that does not stop the instance (an MCP server that
    #: failed to start, say): logged, and shown as a warning of the plugin by ``doctor``
    report_problem: Callable[[str], None] = field(default=lambda message: None)
    #: ``run_later(fn, label, *, kind="write", session=None)``: queue ``fn`` on one of this
    #: instance's lanes and return at once; False (``fn`` not queued) once the host is closing.
    #: ``session`` picks the lane of that conversation, as for its hooks (without it: the lane of
    #: calls that name no conversation). ``kind="write"``: the background lane of its later
    #: hooks; the host drains it, within ``memory.worker_drain_timeout``, before it calls
    #: ``shutdown``. ``kind="disposable"``: work it may lose (a recall prepared for the next
    #: turn), on a lane of its own, never behind the writes nor they behind it; no deadline, and
    #: the drain drops it when queued and does not wait for it when running. What ``fn`` raises
    #: is logged. Without a host (a context built by hand) ``fn`` runs at once.
    run_later: RunLater = field(default=lambda fn, label, **_: _now(fn))
    #: ``llm(role)``: the model client of ``"main"`` (``llm.client``) or ``"auxiliary"``
    #: (``llm.auxiliary_client``: summaries, memory reviews), built once by the host; it raises
    #: :class:`hermes_core.llm.LLMError` (or an unknown-name error) when none can be built.
    #: Without a host (a context built by hand) there is no client.
    llm: Callable[[str], LLMClient] = field(default=lambda role: _no_client(role))


def _no_client(role: str) -> LLMClient:
    raise LLMError(f"no {role} model client: this plugin context was built without a host",
                   failure=LLMFailure.NOT_CONFIGURED)


def _now(fn: Callable[[], None]) -> bool:
    fn()
    return True


class _Instantiable:
    """Shared by the kind base classes: the constructor the kernel calls, and a spelling check.

    A subclass defining a public name one or two letters away from a name of the contract (a
    hook, or a method of its base class) is refused when the class is created, naming the
    intended one: a misspelled name would otherwise switch the feature off without a word.
    """

    name: ClassVar[str]
    if TYPE_CHECKING:
        Config: ClassVar[type[BaseModel]]
    else:
        Config = DeferredConfig("hermes_core._noconfig", "NoConfig")
    #: the config.yaml section holding this class's settings; defaults to ``name``
    config_section: ClassVar[str | None] = None
    #: one line for listings
    description: ClassVar[str] = ""

    def __init__(self, config: BaseModel, context: PluginContext) -> None:
        self.config = config
        self.context = context

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__module__ == __name__:
            return  # the base classes themselves
        from . import hookspecs

        contract = set(hookspecs.__all__) | {
            n for base in cls.__mro__[1:] if base.__module__ == __name__
            for n in vars(base) if not n.startswith("_")}
        for attr, value in vars(cls).items():
            if attr.startswith("_") or attr in contract or _is_hookimpl(value):
                continue  # a misspelled @hookimpl is named by the kernel's checks at activation
            close = next((name for name in sorted(contract) if _near(attr, name)), None)
            if close is not None:
                raise TypeError(
                    f"{cls.__qualname__}.{attr} looks like a misspelling of {close!r} (a name "
                    f"of the plugin contract): rename it to {close!r}, or give it a name that "
                    "is not so close")


def _near(a: str, b: str) -> bool:
    """Whether ``a`` is a likely misspelling of ``b``: one edit away for names of 6+ letters,
    two for names of 10+ (short names are left alone: too many honest neighbours)."""
    limit = 2 if len(b) >= 10 else 1 if len(b) >= 6 else 0
    if limit == 0 or abs(len(a) - len(b)) > limit:
        return False
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > limit:
            return False
        previous = current
    return previous[-1] <= limit


def _is_hookimpl(value: object) -> bool:
    try:
        marker = vars(value).get(f"{PROJECT_NAME}_impl")
    except TypeError:  # no __dict__: a plain value, not a marked function
        return False
    return isinstance(marker, dict)


class MemoryProvider(_Instantiable):
    """Base class for memory providers; implement the memory lifecycle hooks with ``@hookimpl``."""

    #: whether the kernel may serve this provider's last ``prefetch`` answer at a later turn that
    #: it misses the deadline of (recall usually stays useful); ``False`` for answers that belong
    #: to the one user message they were computed for: such a turn then gets nothing from it
    reuse_prefetch: bool = True


class ContextEngine(_Instantiable):
    """Base class for context engines; implement ``should_compress``, ``compress`` and
    ``update_from_response`` with ``@hookimpl`` (and optionally ``describe_context``,
    ``on_turn_start`` and ``on_prompt_assembled``)."""


class Platform(_Instantiable):
    """Base class for platform adapters; implement ``connect``, ``disconnect`` and ``send``.

    The methods below are what front ends (``hermes-core serve``, ``chat``) ask of an adapter
    besides its hooks; the defaults suit an adapter that does not listen on a port.
    """

    #: whether :meth:`listen_on` applies (the adapter serves on an address and port)
    listens: ClassVar[bool] = False

    def dispatcher_options(self) -> dict[str, Any]:
        """Keyword arguments for the :class:`~hermes_core.dispatch.ConversationDispatcher` built
        for this adapter (e.g. ``{"max_conversations": 1}``); empty by default."""
        return {}

    def listen_on(self, host: str | None = None, port: int | None = None) -> None:
        """Override the address and port from the command line (``serve --host/--port``);
        ``None`` keeps the configured value. Only called when :attr:`listens` is true."""

    def check_ready(self) -> None:
        """Raise a :class:`~hermes_core.errors.HermesCoreError` saying what is missing (a secret,
        a token) when the adapter cannot start; called before anything starts."""

    @property
    def url(self) -> str | None:
        """Where the adapter can be reached once connected, for the start-up line; ``None``
        when that means nothing for it."""
        legacy = self.__dict__.get("_legacy_url")
        return legacy if isinstance(legacy, str) else None

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "url" and type(self).url is Platform.url:  # type: ignore[comparison-overlap]
            # the 0.1 form (``self.url = ...`` in the constructor): kept working until 0.3
            from .deprecations import set_legacy_url

            set_legacy_url(self, value)
            return
        super().__setattr__(name, value)

    def can_send(self) -> bool:
        """Whether the ``send`` hook can deliver a message the agent starts itself (e.g. a
        background memory review's notice after the reply went out). When true, the dispatcher
        delivers such notices through ``send``; false by default."""
        return False


#: what a tool can be for the memory review, flush and nudge (see :class:`Curation`)
CURATION_ROLES = ("memory", "procedures")


@dataclass(frozen=True, slots=True)
class Curation:
    """How a tool takes part in memory curation (the built-in ``memory_review`` plugin: the
    background review, the pre-compaction flush and the skill nudge).

    ``role="memory"``: the tool writes long-term memory. The background review and the
    pre-compaction flush offer the model this tool (and only it); ``instructions`` tell the model
    how to use it there, ``snapshot()`` returns what the store holds now (text for the review's
    prompt; called on the review's lane) and ``describe(arguments, result)`` turns a successful
    call into short human descriptions of the changes ("added to MEMORY.md: ..."), which become
    the ``memory updated: ...`` notice.

    ``role="procedures"``: the tool saves reusable procedures (skills). After ``nudge_interval``
    tool-loop iterations without a call of it (0: never), the review plugin adds ``nudge`` (default: a
    generic reminder naming the tool) to the batch's last tool result.
    """

    role: Literal["memory", "procedures"]
    instructions: str = ""
    snapshot: Callable[[], str] | None = None
    describe: Callable[[dict[str, Any], str], list[str]] | None = None
    nudge_interval: int = 0
    nudge: str = ""

    def __post_init__(self) -> None:
        if self.role not in CURATION_ROLES:
            raise ValueError(f"curation role {self.role!r} is unknown: use one of "
                             f"{', '.join(map(repr, CURATION_ROLES))}")
        if not isinstance(self.nudge_interval, int) or self.nudge_interval < 0:
            raise ValueError(f"curation nudge_interval must be an int >= 0, got {self.nudge_interval!r}")


@functools.lru_cache(maxsize=512)
def _model_schema(model: type[BaseModel]) -> dict[str, Any]:
    # Building a JSON schema walks the whole model (~7 ms); every agent assembles its tools, and
    # with shared storage every turn builds an agent. A model's schema never changes.
    return model.model_json_schema()


class EmbedderUnavailable(RuntimeError):
    """An embedder cannot run here: its package, model file or service is missing or broken.

    The message says what is missing and how to fix it (for example which extra to install).
    """


class Embedder(_Instantiable):
    """Base class for embedders (registered with ``register_embedders``): texts to vectors.

    ``embed(texts)`` returns one vector per text, each of ``dimension`` floats, L2-normalised
    (so a dot product is the cosine similarity). ``model_id`` names the model and its version:
    vectors of different model ids are never compared (a change of model needs
    ``hermes-core sessions reindex``). ``embed`` may be called from several threads at once;
    an embedder that loads a model should do it lazily, once, under a lock, and raise
    :class:`EmbedderUnavailable` with a clear message when it cannot.
    """

    #: floats per vector
    dimension: ClassVar[int] = 0
    #: the model and its version, e.g. ``"sentence-transformers/all-MiniLM-L6-v2"``
    model_id: ClassVar[str] = ""

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this embedder cannot run here (a missing package, ...), or None when it can.

        Must be cheap (no model load): ``embeddings.embedder: auto`` uses it to choose.
        """
        return None

    @property
    def loaded(self) -> bool:
        """False while the model this embedder loads lazily is not in memory yet: the kernel
        then loads it on its background lane once turns pause, never on a turn's path (a search
        in a turn goes on by words meanwhile). An embedder with nothing to load keeps True."""
        return True

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        raise NotImplementedError(f"{type(self).__name__}.embed is not implemented")


class LLMClient(_Instantiable):
    """Base class for model clients (registered with ``register_llm_clients``).

    ``llm.client`` selects the client of the main model and ``llm.auxiliary_client`` the one of
    summaries and memory reviews; the kernel builds it with ``(config, context)`` where
    ``config`` is the client's own section (vendor settings) and ``context.config.llm`` holds the
    client-neutral settings (``model``, ``max_tokens``, ``timeout``, ``max_retries``, ...).
    A client implements :class:`hermes_core.llm.ChatLLM`: :meth:`respond` (one call, tools and
    streaming) and :meth:`complete` (text only; given here on top of ``respond``). Every failure
    is an :class:`hermes_core.llm.LLMError` with its :class:`hermes_core.llm.LLMFailure` class
    (``AUTH`` for a wrong key: never retried).

    Tools come as dicts with ``name``, ``description``, ``input_schema``; tool calls go back as
    :class:`hermes_core.types.ToolCall`; tool results are ``Message(role="tool", ...)`` in the
    history. The client converts both ways for its vendor.
    """

    #: the model this instance asks when a call names none (set by the kernel for each role)
    model: str = ""

    def respond(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        max_tokens: int,
        model: str | None = None,
        timeout: float | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> LLMResponse:
        """One model call; ``on_text`` (when given) receives each streamed text delta."""
        raise NotImplementedError(f"{type(self).__name__}.respond is not implemented")

    def complete(
        self,
        *,
        system: str,
        messages: list[Message],
        max_tokens: int,
        model: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """The text of one response; an empty answer is an ``EMPTY`` failure."""
        response = self.respond(system=system, messages=messages, max_tokens=max_tokens,
                                model=model, timeout=timeout)
        if not response.text.strip():
            raise LLMError(f"the LLM answered with no text (stop_reason={response.stop_reason!r})",
                           failure=LLMFailure.EMPTY)
        return response.text

    def context_window(self, model: str) -> int | None:
        """The model's context window in tokens; ``None`` when this client does not know it."""
        return None

    def count_tokens(self, *, system: str, messages: Sequence[Message],
                     tools: Sequence[dict[str, Any]] | None, model: str) -> int | None:
        """An exact count of the prompt from the vendor, or ``None`` (the kernel then uses its
        local estimate)."""
        return None

    def platform_context(self, edits: Sequence[dict[str, Any]],
                         on_refused: Callable[[str], None]) -> str | None:
        """Ask the client to send the vendor's own context management with the main model's
        requests from now on: ``edits`` are the vendor's edit objects (for Anthropic, the
        ``context_management.edits`` items, e.g. ``{"type": "clear_tool_uses_20250919", ...}``).

        Returns ``None`` when the client will send them, else why it cannot (the default:
        unsupported; the context engine then keeps its local path). A client that supports the
        feature but does not know an edit's name raises :class:`~hermes_core.errors.ConfigError`
        naming it. When a request carrying the edits is refused as a bad request and the same request
        without them goes through, the client stops sending them and calls ``on_refused(why)``."""
        return f"the {self.name or type(self).__name__!r} model client has no platform context management"

    def supports_tools(self, model: str) -> bool:
        """Whether ``model`` can be offered tools (the agent refuses to start with one that
        cannot: its memory, search and skills are tools)."""
        return True

    def unavailable(self) -> str | None:
        """Why this client cannot answer at all (no key, a missing package), or ``None``; cheap,
        no network. ``chat`` and ``serve`` refuse to start with it (exit 3)."""
        return None

    def close(self) -> None:
        """Release connections; called once when the host closes."""


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool the model can call.

    Give either ``input_model`` (a pydantic model: its JSON schema is derived and arguments are
    validated into an instance of it before the handler sees them) or ``parameters`` (a JSON schema
    object: the handler gets the raw ``dict``). The handler returns a ``str`` or anything
    JSON-serialisable; raising :class:`~hermes_core.errors.ToolError` reports a clean error to the
    model.

    ``parallel_safe`` tools may run concurrently with other parallel-safe calls of one response;
    ``path_arguments`` names the arguments holding file paths, so calls touching the same path are
    never run at the same time.

    ``available(config)`` lets the config switch the tool off. ``guidance`` is prompt text the
    kernel adds to the system prompt of a session that offers the tool (when and how to use it);
    ``curation`` makes the tool part of the kernel's memory curation (see :class:`Curation`).
    """

    name: str
    description: str
    handler: Callable[[Any, ToolContext], Any]
    parameters: dict[str, Any] | None = None
    input_model: type[BaseModel] | None = None
    parallel_safe: bool = False
    path_arguments: tuple[str, ...] = ()
    guidance: str = ""
    curation: Curation | None = None
    #: called with the :class:`~hermes_core.config.CoreConfig` when a session's tool list is
    #: built: False leaves the tool out of it (a tool the config switched off is absent, not
    #: failing); ``None``: always offered
    available: Callable[[Any], bool] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not TOOL_NAME_RE.match(self.name):
            raise ValueError(
                f"tool name {self.name!r} is invalid: use 1-64 letters, digits, '_' or '-'"
            )
        if (self.parameters is None) == (self.input_model is None):
            raise ValueError(
                f"tool {self.name!r}: give exactly one of 'parameters' (a JSON schema) "
                "or 'input_model' (a pydantic model)"
            )
        if self.parameters is not None and self.parameters.get("type") != "object":
            raise ValueError(
                f"tool {self.name!r}: 'parameters' must be a JSON schema with \"type\": \"object\""
            )
        if not callable(self.handler):
            raise ValueError(f"tool {self.name!r}: 'handler' must be callable")
        if inspect.iscoroutinefunction(self.handler):
            raise ValueError(
                f"tool {self.name!r}: 'handler' is `async def`, but it is called as a plain function "
                "(on a worker thread, under hooks.tool_timeout); make it a plain `def` (call an "
                "async client with asyncio.run, or use its synchronous API)")
        if not isinstance(self.guidance, str):
            raise ValueError(f"tool {self.name!r}: 'guidance' must be a str")
        if self.curation is not None and not isinstance(self.curation, Curation):
            raise ValueError(f"tool {self.name!r}: 'curation' must be a hermes_core.kinds.Curation, "
                             f"not {type(self.curation).__name__}")

    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments."""
        if self.input_model is not None:
            return copy.deepcopy(_model_schema(self.input_model))
        assert self.parameters is not None
        return self.parameters

    def schema(self) -> dict[str, Any]:
        """The provider-neutral description sent to the LLM adapter."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema(),
        }

    def invoke(self, arguments: dict[str, Any], context: ToolContext) -> str:
        """Validate ``arguments``, run the handler and return its result as text.

        Raises :class:`~hermes_core.errors.ToolError` for invalid arguments or a result that is not
        JSON-serialisable; whatever else the handler raises propagates (the agent loop turns it into
        an error result for the model).
        """
        from pydantic import BaseModel, ValidationError

        args: Any = arguments
        if self.input_model is not None:
            try:
                args = self.input_model.model_validate(arguments)
            except ValidationError as exc:
                raise ToolError(f"invalid arguments for tool {self.name!r}: {exc}") from None
        result = self.handler(args, context)
        if isinstance(result, str):
            return result
        if isinstance(result, BaseModel):
            return result.model_dump_json()
        import json

        try:
            return json.dumps(result, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise ToolError(
                f"tool {self.name!r} returned a {type(result).__name__}, which is not JSON: {exc}"
            ) from None
