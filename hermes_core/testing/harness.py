"""Building blocks for plugin tests, usable with or without pytest.

* :func:`isolated_home` — a temporary ``$HERMES_CORE_HOME`` with a config of your choice;
* :func:`make_host` — a :class:`~hermes_core.host.PluginHost` with entry-point autoload off, so a
  test never depends on what happens to be installed;
* :func:`registered_plugin` — register a throwaway plugin on a host for the length of a block;
* :func:`make_instance` — build one provider, engine or platform exactly as the kernel does
  (validated config section, :class:`~hermes_core.kinds.PluginContext`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import textwrap
import types
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .._markers import hookimpl
from ..config import parse_config_text
from ..host import PluginHost
from ..paths import HOME_ENV

__all__ = ["isolated_home", "make_host", "make_instance", "registered_plugin"]

#: variables that would make a test depend on the developer's machine
_ISOLATED_ENV = (
    "HERMES_CORE_DISABLE_PLUGINS",
    "HERMES_CORE_STRICT_PLUGINS",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
)


@contextlib.contextmanager
def isolated_home(config: str = "", *, path: Path | None = None) -> Iterator[Path]:
    """A fresh home folder set as ``$HERMES_CORE_HOME`` inside the block, with ``config`` written
    to its config.yaml; the environment is restored afterwards."""
    saved = {name: os.environ.get(name) for name in (HOME_ENV, *_ISOLATED_ENV)}
    with contextlib.ExitStack() as stack:
        home = path or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hermes-home-")))
        home.mkdir(parents=True, exist_ok=True)
        if config:
            (home / "config.yaml").write_text(textwrap.dedent(config), encoding="utf-8")
        for name in _ISOLATED_ENV:
            os.environ.pop(name, None)
        os.environ[HOME_ENV] = str(home)
        try:
            yield home
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def make_host(
    home: Path,
    *,
    plugins: Iterable[tuple[str, object]] = (),
    config: str | None = None,
    builtins: bool = True,
    entry_points: bool = False,
    directories: bool = False,
) -> PluginHost:
    """A loaded host for tests: built-in plugins on, entry points and directory plugins off.

    ``config`` (YAML text) overrides what is in ``home/config.yaml``.
    """
    loaded = None
    if config is not None:
        loaded = parse_config_text(textwrap.dedent(config), home / "config.yaml")
    return PluginHost.load(
        home,
        config=loaded,
        builtins=builtins,
        entry_points=entry_points,
        directories=directories,
        plugins=plugins,
    )


@contextlib.contextmanager
def registered_plugin(host: PluginHost, plugin: object, name: str = "throwaway") -> Iterator[Any]:
    """Register ``plugin`` (a module or object holding hookimpls) on ``host`` inside the block.

    Yields its :class:`~hermes_core.loader.PluginRecord`; raises if the plugin failed to register,
    so a broken throwaway plugin fails the test that uses it.
    """
    record = host.register_plugin(name, plugin)
    try:
        if record.error:
            raise AssertionError(f"throwaway plugin {name!r} failed to register: {record.error}")
        yield record
    finally:
        host.unregister_plugin(name)


def make_instance(
    cls: type, kind: str, home: Path, *, config: str = "", plugin_name: str = "under-test"
) -> Any:
    """Build ``cls`` as the kernel would: its section of ``config`` validated, a real context.

    ``kind`` is ``memory-provider``, ``context-engine`` or ``platform``. The instance is
    registered on a fresh host (built-ins off), reachable as ``instance.context``.
    """
    hook = {
        "memory-provider": "register_memory_providers",
        "context-engine": "register_context_engines",
        "platform": "register_platforms",
    }[kind]

    def register_all(register: Any) -> None:
        register(cls)

    registrar = types.SimpleNamespace(**{hook: hookimpl(specname=hook)(register_all)})
    host = make_host(home, plugins=[(plugin_name, registrar)], config=config, builtins=False)
    record = host.records[plugin_name]
    if record.error:
        raise AssertionError(f"{cls.__name__} could not be registered: {record.error}")
    return host.activate(kind, cls.name, config_key=cls.name)  # type: ignore[attr-defined]
