"""The things plugins register: base classes for each kind, and :class:`Tool`.

A class registered through ``register_memory_providers``, ``register_context_engines``,
``register_platforms`` or ``register_embedders`` needs only two class attributes: ``name`` and,
optionally, ``Config`` (a pydantic model). Subclassing :class:`MemoryProvider`,
:class:`ContextEngine`, :class:`Platform` or :class:`Embedder` is a convenience: it supplies an
empty ``Config`` and the constructor the kernel calls.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import ToolError
from .types import MemoryWrite, ToolContext

if TYPE_CHECKING:
    from .config import CoreConfig
    from .embeddings import GuardedEmbedder

__all__ = [
    "ContextEngine",
    "Embedder",
    "EmbedderUnavailable",
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


class NoConfig(BaseModel):
    """The config model of a plugin that takes no settings: any key is refused."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


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


class _Instantiable:
    name: ClassVar[str]
    Config: ClassVar[type[BaseModel]] = NoConfig
    #: the config.yaml section holding this class's settings; defaults to ``name``
    config_section: ClassVar[str | None] = None
    #: one line for listings
    description: ClassVar[str] = ""

    def __init__(self, config: BaseModel, context: PluginContext) -> None:
        self.config = config
        self.context = context


class MemoryProvider(_Instantiable):
    """Base class for memory providers; implement the memory lifecycle hooks with ``@hookimpl``."""


class ContextEngine(_Instantiable):
    """Base class for context engines; implement ``should_compress``, ``compress`` and
    ``update_from_response`` with ``@hookimpl``."""


class Platform(_Instantiable):
    """Base class for platform adapters; implement ``connect``, ``disconnect`` and ``send``."""


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

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        raise NotImplementedError(f"{type(self).__name__}.embed is not implemented")


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
    """

    name: str
    description: str
    handler: Callable[[Any, ToolContext], Any]
    parameters: dict[str, Any] | None = None
    input_model: type[BaseModel] | None = None
    parallel_safe: bool = False
    path_arguments: tuple[str, ...] = ()

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

    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments."""
        if self.input_model is not None:
            return self.input_model.model_json_schema()
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
        try:
            return json.dumps(result, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise ToolError(
                f"tool {self.name!r} returned a {type(result).__name__}, which is not JSON: {exc}"
            ) from None
