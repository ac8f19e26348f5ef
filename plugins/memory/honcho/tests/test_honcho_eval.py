"""``hermes-core eval`` scores the Honcho provider: the shipped LongMemEval-shaped dataset is
ingested through the agent loop into the loopback Honcho server (real HTTP), one workspace per
question, and the provider's prefetch and search tools are asked each question.

Runs where hermes-core-honcho is pip-installed (``tox -e honcho``): the CLI finds the provider
through its entry point, as a user's install would.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from hermes_core_honcho.testing import HonchoTestServer

from hermes_core.cli import cli

MINI = Path(__file__).resolve().parents[4] / "examples" / "eval" / "hermes-mini.json"

pytestmark = [
    pytest.mark.skipif(not MINI.exists(), reason="needs the hermes-core repository's examples/"),
    pytest.mark.skipif(os.environ.get("HERMES_CORE_HONCHO_INSTALLED") != "1",
                       reason="needs hermes-core-honcho pip-installed (tox -e honcho)"),
]


def test_eval_scores_honcho_with_one_workspace_per_question(
        hermes_home: Path, honcho_server: HonchoTestServer, honcho_config: str) -> None:
    (hermes_home / "config.yaml").write_text(honcho_config, encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["eval", str(MINI), "--provider", "honcho", "--set", "honcho.workspace=eval-{case}",
              "--limit", "4", "--json"],
        env={"HERMES_CORE_HOME": str(hermes_home)}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["providers"] == ["honcho"]
    assert report["failures"] == [] and report["summary"]["overall"]["scored"] == 4
    assert {"prefetch:honcho", "tool:honcho_search"} <= set(report["sources"])
    # every question's haystack landed in its own workspace, user and assistant turns alike
    first = report["questions"][0]
    stored = honcho_server.store.messages(f"eval-{first['id']}")
    haystack = json.loads(MINI.read_text(encoding="utf-8"))[0]["haystack_sessions"]
    assert len(stored) == sum(len(s) for s in haystack)
    assert honcho_server.store.messages("test-ws") == []  # nothing in the configured workspace
    # Honcho's word search finds the exact-words questions' evidence
    search = {q["id"]: next(s for s in q["sources"] if s["source"] == "tool:honcho_search")
              for q in report["questions"]}
    assert search["editor-exact"]["scores"]["recall@3"] == 1.0
    assert search["dog-exact"]["scores"]["recall@3"] == 1.0
