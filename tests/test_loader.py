"""Discovery and loading: entry points, directory plugins, blocking, failures, strict mode."""

from __future__ import annotations

import pytest

from hermes_core import PluginHost, PluginLoadError
from hermes_core.config import parse_config_text

ENGINE_PLUGIN = """
from hermes_core import ContextEngine, hookimpl

class Engine(ContextEngine):
    name = "{engine}"

@hookimpl
def register_context_engines(register):
    register(Engine)
"""

SIDE_EFFECT_PLUGIN = """
import pathlib
pathlib.Path({marker!r}).write_text("imported")
from hermes_core import hookimpl

@hookimpl
def register_tools(register):
    pass
"""


def load(home, config_text="", **kw):
    config = parse_config_text(config_text, home / "config.yaml")
    return PluginHost.load(home, config=config, builtins=False, **kw)


def test_entry_point_plugin_is_listed_with_distribution_and_version(home, fake_dist):
    fake_dist("hermes-core-demo", "1.2.3", {"demo": "demo_plugin"},
              {"demo_plugin": ENGINE_PLUGIN.format(engine="demo_engine")})
    host = load(home)
    rec = host.records["demo"]
    assert (rec.source, rec.distribution, rec.version, rec.error) == (
        "entry-point", "hermes-core-demo", "1.2.3", None)
    assert rec.registers == ["context-engine:demo_engine"]
    assert rec.hooks == ["register_context_engines"]


def test_entry_point_can_name_an_attribute(home, fake_dist):
    src = """
from hermes_core import hookimpl
class Holder:
    @hookimpl
    def register_tools(self, register):
        pass
plugin = Holder()
"""
    fake_dist("attr-dist", "0.1", {"attrplug": "attr_mod:plugin"}, {"attr_mod": src})
    host = load(home)
    assert host.records["attrplug"].error is None
    assert host.records["attrplug"].hooks == ["register_tools"]


def test_disabled_plugin_is_never_imported(home, fake_dist, tmp_path):
    marker = tmp_path / "imported.txt"
    fake_dist("side-dist", "1.0", {"side": "side_mod"},
              {"side_mod": SIDE_EFFECT_PLUGIN.format(marker=str(marker))})
    host = load(home, "plugins:\n  disabled: [side]\n")
    assert not marker.exists()
    assert host.records["side"].enabled is False
    assert host.records["side"].error is None
    # the same plugin, not disabled, is imported: the marker proves the test can fail
    load(home)
    assert marker.read_text() == "imported"


def test_disable_by_distribution_name_and_by_env(home, fake_dist, tmp_path, monkeypatch):
    marker = tmp_path / "imported.txt"
    fake_dist("Side_Dist", "1.0", {"side": "side_mod2"},
              {"side_mod2": SIDE_EFFECT_PLUGIN.format(marker=str(marker))})
    assert load(home, "plugins:\n  disabled: [side-dist]\n").records["side"].enabled is False
    monkeypatch.setenv("HERMES_CORE_DISABLE_PLUGINS", " other , side ")
    assert load(home).records["side"].enabled is False
    assert not marker.exists()


def test_plugin_raising_on_import_is_recorded_and_others_load(home, fake_dist):
    fake_dist("bad-dist", "0.1", {"bad": "bad_mod"}, {"bad_mod": "raise RuntimeError('kaboom')"})
    fake_dist("good-dist", "0.1", {"good": "good_mod"},
              {"good_mod": ENGINE_PLUGIN.format(engine="good_engine")})
    host = load(home)
    err = host.records["bad"].error
    assert "RuntimeError" in err and "kaboom" in err and "'bad-dist'" in err
    assert host.records["good"].error is None
    assert host.registries.context_engines.names() == ["good_engine"]


def test_entry_point_naming_missing_module(home, fake_dist):
    fake_dist("ghost-dist", "0.1", {"ghost": "no_such_module_xyz"}, {})
    err = load(home).records["ghost"].error
    assert "no_such_module_xyz" in err and "does not exist" in err and "ghost-dist" in err


def test_plugin_needing_missing_dependency(home, fake_dist):
    fake_dist("dep-dist", "0.1", {"dep": "dep_mod"}, {"dep_mod": "import not_installed_pkg_q"})
    err = load(home).records["dep"].error
    assert "needs module 'not_installed_pkg_q'" in err


def test_sys_exit_in_plugin_does_not_exit_host(home, fake_dist):
    fake_dist("exit-dist", "0.1", {"exiter": "exit_mod"}, {"exit_mod": "import sys; sys.exit(3)"})
    assert "SystemExit" in load(home).records["exiter"].error


def test_strict_mode_raises(home, fake_dist, monkeypatch):
    fake_dist("bad-dist", "0.1", {"bad": "bad_mod_strict"}, {"bad_mod_strict": "1/0"})
    monkeypatch.setenv("HERMES_CORE_STRICT_PLUGINS", "1")
    with pytest.raises(PluginLoadError) as exc:
        load(home)
    assert "ZeroDivisionError" in str(exc.value) and "HERMES_CORE_STRICT_PLUGINS" in str(exc.value)


def test_directory_plugin_loads_with_relative_imports(home, dir_plugin):
    folder = dir_plugin("mine", """
        from .helper import ENGINE_NAME
        from hermes_core import ContextEngine, hookimpl

        class E(ContextEngine):
            name = ENGINE_NAME

        @hookimpl
        def register_context_engines(register):
            register(E)
    """)
    (folder / "helper.py").write_text("ENGINE_NAME = 'from_dir'\n")
    host = load(home)
    assert host.records["mine"].source == "directory"
    assert host.records["mine"].error is None
    assert host.registries.context_engines.names() == ["from_dir"]


def test_directory_without_init_is_reported(home):
    (home / "plugins" / "empty").mkdir(parents=True)
    err = load(home).records["empty"].error
    assert "has no __init__.py" in err and "add __init__.py" in err


def test_name_collision_first_source_wins_and_both_are_named(home, fake_dist, dir_plugin):
    fake_dist("ep-dist", "1.0", {"same": "same_mod"},
              {"same_mod": ENGINE_PLUGIN.format(engine="ep_engine")})
    dir_plugin("same", ENGINE_PLUGIN.format(engine="dir_engine"))
    host = load(home)
    assert host.records["same"].source == "entry-point"
    loser = host.records["same (directory)"]
    assert loser.enabled is False
    assert "already taken by the entry-point plugin" in loser.error and "ep-dist" in loser.error
    assert host.registries.context_engines.names() == ["ep_engine"]


def test_misspelled_hook_is_caught_by_check_pending(home, dir_plugin):
    dir_plugin("typo", """
        from hermes_core import hookimpl

        @hookimpl
        def prefetchh(query):
            return "x"
    """)
    host = load(home)
    err = host.records["typo"].error
    assert "prefetchh" in err and "hookspecs" in err
    assert host.pm.get_plugin("typo") is None


def test_wrong_hook_arguments_are_refused_at_register(home, dir_plugin):
    dir_plugin("wrongargs", """
        from hermes_core import hookimpl

        @hookimpl
        def register_tools(register, extra_argument):
            pass
    """)
    err = load(home).records["wrongargs"].error
    assert "extra_argument" in err and "register_tools(register)" in err


def test_entry_points_are_read_once_per_process(home, fake_dist, monkeypatch):
    from hermes_core import loader

    calls = []
    import importlib.metadata as md
    real = md.entry_points
    monkeypatch.setattr(md, "entry_points",
                        lambda **kw: calls.append(kw) or real(**kw))
    loader.entry_points.cache_clear()
    load(home)
    load(home)
    assert calls == [{"group": "hermes_core.plugins"}]


def test_disabling_a_selected_default_provider_switches_it_off(home, monkeypatch, caplog):
    # skills is one of the default memory.providers; disabling its plugin must not break loading
    monkeypatch.setenv("HERMES_CORE_DISABLE_PLUGINS", "skills")
    from hermes_core.testing import make_host

    host = make_host(home)
    try:
        active = host.activate_memory_providers()
        names = {type(p).name for p in active}
        assert "skills" not in names and "file_memory" in names
        assert "its plugin is disabled" in caplog.text
    finally:
        host.shutdown()


def test_an_unknown_selected_provider_still_fails(home):
    from hermes_core.errors import UnknownNameError
    from hermes_core.testing import make_host

    host = make_host(home, config="memory:\n  providers: [file_memory, no_such_thing]\n")
    try:
        with pytest.raises(UnknownNameError, match="no_such_thing"):
            host.activate_memory_providers()
    finally:
        host.shutdown()


def test_an_install_that_offers_no_plugin_is_named():
    from hermes_core.loader import install_problems

    before = {"httpx": ("0.27.0", frozenset())}
    ours = {**before, "hc-good": ("1.0", frozenset({"hermes_core.plugins", "console_scripts"}))}
    assert install_problems(before, ours) == []
    assert install_problems(ours, ours) == []  # nothing changed: nothing to say
    lookalike = {**before, "hc-typo": ("1.0", frozenset({"hermes_agent.plugins"}))}
    [problem] = install_problems(before, lookalike)
    assert "hc-typo 1.0 declares entry points in the group 'hermes_agent.plugins'" in problem
    assert '[project.entry-points."hermes_core.plugins"]' in problem
    none = {**before, "hc-none": ("1.0", frozenset({"console_scripts"})),
            "httpx": ("0.28.0", frozenset())}
    [problem] = install_problems(before, none)
    assert "none of the 2 distribution(s) pip installed or changed (hc-none, httpx)" in problem
    # a plugin installed with its dependencies is fine
    with_dep = {**ours, "httpx": ("0.28.0", frozenset())}
    assert install_problems(before, with_dep) == []
