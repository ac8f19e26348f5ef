"""``hermes-core eval`` scores the Hindsight provider against the real hindsight-api server: the
shipped LongMemEval-shaped dataset's first questions are ingested through the agent loop (one bank
per question), the provider's background work is settled (its ``settle``), and its prefetch and
``hindsight_recall`` are asked each question. The model's words are the dataset's own turns; the
server runs Hindsight's ``mock`` LLM.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli

from .conftest import REPO, config_text

MINI = REPO / "examples" / "eval" / "hermes-mini.json"


@pytest.mark.skipif(not MINI.exists(), reason="needs the hermes-core repository's examples/")
def test_eval_scores_hindsight_with_one_bank_per_question(server, api_key_env, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    run_id = uuid.uuid4().hex[:6]
    (home / "config.yaml").write_text(config_text(server.base_url, "unused"), encoding="utf-8")
    # the command a user runs: the installed hindsight distribution is found by its entry point
    result = CliRunner().invoke(cli, [
        "eval", str(MINI), "--provider", "hindsight", "--engine", "compressor",
        "--set", f"hindsight.bank=eval-{run_id}-{{case}}", "--k", "1,3,10", "--limit", "3",
        "--settle", "120", "--json"], env={"HERMES_CORE_HOME": str(home)}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    print(json.dumps({"summary": report["summary"]["overall"], "sources": report["sources"]}, indent=1))
    assert report["failures"] == [], report["failures"]
    assert report["summary"]["overall"]["scored"] == 3
    assert {"prefetch:hindsight", "tool:hindsight_recall"} <= set(report["sources"])
    # every question's haystack went into its own bank, and recall answered from it
    for q in report["questions"]:
        recall = next(s for s in q["sources"] if s["source"] == "tool:hindsight_recall")
        assert recall["status"] == "ok" and recall["items"], q["id"]
