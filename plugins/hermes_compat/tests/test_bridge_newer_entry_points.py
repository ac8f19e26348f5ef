"""Entry points written for a newer Hermes Agent than 0.19.0: its memory provider loader takes
an entry point naming a provider instance, an object with ``register``, or a factory called
with no argument (0.19.0 read no such entry point group). Under the bridge each such provider
is found, made and driven through real turns, as newer Hermes does; only the model's words
are scripted."""

from __future__ import annotations

import json
from pathlib import Path

import hermes_style
import pytest
from conftest import run
from hermes_core_hermes_compat import discovery

TURNS = [("I keep bees in Utrecht.", "Noted."), ("Where are my bees?", "Utrecht.")]

#: the Recorder provider without its register(ctx): the entry point names something else
CLASS_ONLY = hermes_style.RECORDER.split("\ndef register(ctx):")[0]

SHAPES = {
    # ``provider = Recorder()``: the entry point names the instance
    "instance": ("provider", CLASS_ONLY + "\nprovider = Recorder()\n"),
    # an object (not a module, not a function) whose ``register`` registers the provider
    "register-object": ("plugin", CLASS_ONLY + '''
class _Plugin:
    def register(self, ctx):
        ctx.register_memory_provider(Recorder())


plugin = _Plugin()
'''),
    # a factory taking no argument, returning the provider
    "factory": ("make_provider", CLASS_ONLY + "\ndef make_provider():\n    return Recorder()\n"),
}


def _install(site: Path, package: str, source: str, attr: str) -> None:
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text(source, encoding="utf-8")
    info = site / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(
        f"[hermes_agent.memory_providers]\n{package} = {package}:{attr}\n", encoding="utf-8")


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_provider_entry_point_of_newer_hermes_shape_runs(
        core_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str) -> None:
    package = f"newershape_{shape.replace('-', '_')}"
    attr, source = SHAPES[shape]
    site = tmp_path / "site"
    _install(site, package, source, attr)
    monkeypatch.syspath_prepend(str(site))
    discovery._entry_points.cache_clear()
    discovery._entry_point_candidates.cache_clear()
    name = f"hermes-{package.replace('_', '-')}"
    try:
        found = [c for c in discovery.discover(core_home) if c.distribution == package]
        assert [(c.name, c.source) for c in found] == [(name, "entry-point")]
        from hermes_core_hermes_compat.status import status_of

        assert status_of(found[0], core_home).status == "ready"
        report = run(core_home, TURNS, providers=[name], monkeypatch=monkeypatch)
    finally:
        discovery._entry_points.cache_clear()
        discovery._entry_point_candidates.cache_clear()
    assert report.providers == [name]
    assert [t["reply"] for t in report.turns] == ["Noted.", "Utrecht."]
    # the provider stored turn one and recalled it for turn two
    assert "Utrecht" in report.turns[1]["prefetch"][-1]["text"]
    calls = [json.loads(line)["event"] for line in
             next(core_home.rglob("calls.jsonl")).read_text(encoding="utf-8").splitlines()]
    assert "initialize" in calls and "sync_turn" in calls, calls


def test_a_register_function_entry_point_is_still_called_with_ctx(
        core_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What 0.19.0-style entry points name (a module's ``register(ctx)``) is unchanged: called
    once, with the context, never as a factory."""
    site = tmp_path / "site"
    source = hermes_style.RECORDER.replace(
        "def register(ctx):\n", "CALLED = []\n\n\ndef register(ctx):\n    CALLED.append(ctx)\n")
    _install(site, "oldshape", source, "register")
    monkeypatch.syspath_prepend(str(site))
    discovery._entry_points.cache_clear()
    discovery._entry_point_candidates.cache_clear()
    try:
        report = run(core_home, TURNS, providers=["hermes-oldshape"], monkeypatch=monkeypatch)
    finally:
        discovery._entry_points.cache_clear()
        discovery._entry_point_candidates.cache_clear()
    assert report.providers == ["hermes-oldshape"]
    assert "Utrecht" in report.turns[1]["prefetch"][-1]["text"]
    import oldshape  # type: ignore[import-not-found]

    assert oldshape.CALLED and all(hasattr(ctx, "register_memory_provider")
                                   for ctx in oldshape.CALLED)
