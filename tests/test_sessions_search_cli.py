"""``sessions search`` in the CLI runs the same search as the ``session_search`` tool: by words
and by meaning when an embedder can run (here a tiny deterministic one, a synonym table, as a
directory plugin; the real all-MiniLM-L6-v2 is tested in test_session_archive_hybrid.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.plugins.memory.session_archive import SessionArchive
from hermes_core.types import Message, Session

pytest.importorskip("numpy")

SYNONYMS = '''
from hermes_core import hookimpl
from hermes_core.kinds import Embedder

TOPICS = {"dog": 0, "whippet": 0, "pet": 0, "rent": 1, "flat": 1, "landlord": 1}


class Synonyms(Embedder):
    name = "synonyms"
    dimension = 3
    model_id = "synonyms-v1"

    def embed(self, texts):
        out = []
        for t in texts:
            v = [0.05] * 3
            for word in t.lower().replace("?", " ").split():
                if word in TOPICS:
                    v[TOPICS[word]] += 1.0
            n = sum(x * x for x in v) ** 0.5
            out.append([x / n for x in v])
        return out


@hookimpl
def register_embedders(register):
    register(Synonyms)
'''


def _run(*args: str):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_the_cli_finds_by_meaning_what_the_tool_finds(home: Path, dir_plugin) -> None:
    dir_plugin("synonyms", SYNONYMS)
    (home / "config.yaml").write_text("embeddings:\n  embedder: synonyms\n", encoding="utf-8")
    with SessionArchive(home / "state.db") as archive:
        archive.append_message(Session(id="s-dog"),
                               Message("user", "We adopted a whippet from the shelter"))
        archive.append_message(Session(id="s-flat"),
                               Message("user", "The landlord raised the rent again"))
    _run("sessions", "reindex")
    found = json.loads(_run("sessions", "search", "my pet", "--json").output)
    assert found["semantic"] == "on"
    assert [h["session_id"] for h in found["hits"]][:1] == ["s-dog"], found
    text = _run("sessions", "search", "my pet").output
    assert "s-dog" in text and "No matching messages." not in text
