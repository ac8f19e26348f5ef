"""The provider keeps its retains where there is no ``fcntl`` (Windows): its spool is the kernel's
``hermes_core.storage.spool``, which locks through ``hermes_core.atomic.locked`` (a thread lock
there)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

CODE = """
import sys
sys.modules["fcntl"] = None  # as on Windows: 'import fcntl' raises ImportError
from pathlib import Path
import hermes_core_hindsight.provider
from hermes_core.storage.spool import Spool
spool = Spool(Path(sys.argv[1]) / "spool-b.jsonl")
spool.append({"n": 1}, {"n": 2})
print(len(list(Path(sys.argv[1]).glob("spool-b.jsonl"))))
"""


def test_the_spool_needs_no_fcntl(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", CODE, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
    lines = (tmp_path / "spool-b.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["n"] for line in lines] == [1, 2]
