"""Registries: names, validation of what is registered, collisions, resolution errors."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from hermes_core import ContextEngine, PluginHost, RegistryError, UnknownNameError, hookimpl
from hermes_core.registry import Registry


class EngineA(ContextEngine):
    name = "shared"


class EngineB(ContextEngine):
    name = "shared"


class PluginA:
    @hookimpl
    def register_context_engines(self, register):
        register(EngineA)


class PluginB:
    @hookimpl
    def register_context_engines(self, register):
        register(EngineB)


def load(home, *plugins):
    return PluginHost.load(home, builtins=False, entry_points=False, directories=False,
                           plugins=list(plugins))


def test_two_plugins_one_engine_name_names_both(home):
    host = load(home, ("alpha", PluginA()), ("beta", PluginB()))
    assert host.records["alpha"].error is None
    err = host.records["beta"].error
    assert "'alpha'" in err and "'beta'" in err and "shared" in err
    with pytest.raises(RegistryError) as exc:
        host.registries.context_engines.resolve("shared", config_key="context.engine")
    assert "'alpha' and 'beta'" in str(exc.value)
    assert "plugins disable" in str(exc.value)


def test_unknown_name_lists_available_and_says_not_installed(home):
    host = load(home, ("alpha", PluginA()))
    with pytest.raises(UnknownNameError) as exc:
        host.registries.context_engines.resolve("nope", config_key="context.engine")
    msg = str(exc.value)
    assert "Available: shared" in msg and "may not be installed" in msg


@pytest.mark.parametrize(
    ("obj", "fragment"),
    [
        (EngineA(config=None, context=None), "must register classes"),  # type: ignore[arg-type]
        (type("NoName", (), {}), "whose 'name' is None"),
        (type("BadName", (), {"name": "Has Space"}), "whose 'name' is 'Has Space'"),
        (type("BadConfig", (), {"name": "ok", "Config": dict}), "must be a pydantic BaseModel"),
    ],
)
def test_malformed_registrations_are_refused_with_the_fix(obj, fragment):
    registry: Registry[type] = Registry("context-engine")
    with pytest.raises(RegistryError) as exc:
        registry.add(obj, "plug")
    assert fragment in str(exc.value)
    assert "plug" in str(exc.value)


def test_config_model_is_accepted():
    class Cfg(BaseModel):
        x: int = 1

    registry: Registry[type] = Registry("context-engine")
    registry.add(type("Good", (), {"name": "good", "Config": Cfg}), "plug")
    assert registry.resolve("good", config_key="k").plugin == "plug"


def test_register_raising_is_recorded_and_others_load(home):
    class Broken:
        @hookimpl
        def register_context_engines(self, register):
            raise RuntimeError("boom")

    host = load(home, ("broken", Broken()), ("alpha", PluginA()))
    assert "RuntimeError" in host.records["broken"].error
    assert "register_context_engines" in host.records["broken"].error
    assert host.registries.context_engines.names() == ["shared"]
    assert host.records["alpha"].registers == ["context-engine:shared"]
    assert host.records["alpha"].kinds == ["context-engine"]


@pytest.mark.parametrize("hook", ["register_context_engines", "register_memory_providers",
                                  "register_tools", "register_platforms", "register_embedders",
                                  "register_llm_clients", "register_commands"])
def test_a_registry_hook_that_returns_what_it_should_register_is_named(home, hook):
    """Returning the classes instead of calling ``register`` would silently offer nothing."""
    def offer(self, register):
        return [EngineA]

    offer.__name__ = hook
    Returning = type("Returning", (), {hook: hookimpl(offer)})
    host = load(home, ("returning", Returning()), ("alpha", PluginA()))
    err = host.records["returning"].error
    assert err is not None
    assert f"plugin 'returning': {hook} returned a list" in err
    assert "call register(...)" in err
    assert host.records["alpha"].error is None
    assert host.registries.context_engines.names() == ["shared"]


@pytest.mark.parametrize("name", sorted(__import__("hermes_core.cli", fromlist=["COMMANDS"]).COMMANDS))
def test_a_plugin_command_named_like_a_kernel_command_is_refused(home, name):
    """Every kernel command is reserved: a plugin's command of that name would never be reached
    (the kernel's is found first), so registering it is an error that says so."""
    import click

    class Shadowing:
        @hookimpl
        def register_commands(self, register):
            register(click.Command(name, callback=lambda: None))

    host = load(home, ("shadowing", Shadowing()))
    err = host.records["shadowing"].error
    assert err is not None and f"registers the command {name!r}, which is the kernel's own" in err
    assert name not in host.commands
