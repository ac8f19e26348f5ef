"""How many published Hermes Agent plugins run unchanged in hermes-core through the bridge.

Builds a scratch venv, installs hermes-core and the bridge (plugins/hermes_compat) from this
checkout, then each plugin of :data:`PLUGINS` from the package index, and prints per plugin:

* **loads**: the bridge finds it (entry point, or the folder its own installer writes) and it
  imports and registers (``hermes-core hermes plugins --json`` status is not ``failed``);
* **registers**: it registered a memory provider or a context engine, and the status
  (``ready``, ``needs service or key``, ``needs hermes-agent``);
* **survives a turn**: ``hermes-core replay`` of a two-turn transcript with it selected (beside
  ``file_memory``) exits 0 with no hook problem of its own.

A plugin "runs unchanged" when all three hold. Every one that does not has its reason printed.
Nothing asserts; the figures are for docs/hermes.md.

    python bench/hermes_plugin_coverage.py [--venv DIR] [--only NAME ...] [--json]

The venv (default: a temporary folder) is kept with ``--venv`` so a second run skips installs.
Each plugin runs with ``HOME`` and ``HERMES_CORE_HOME`` pointed at fresh temporary folders.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import venv
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (requirement, plugin name as the bridge lists it or None to find it by distribution)
PLUGINS: list[str] = [
    # the list
    "hermes-local-memory==0.3.1",
    "hermes-llmwiki==0.1.1",
    "hermes-cashew==0.10.2",
    "hermes-itsuki==0.1.0",
    "verbatim-memory==1.0.0",
    "hermes-semantic-memory==0.1.0",
    "lossless-hermes-py==0.1.6",
    # ten more that keep their data on the machine (no cloud service)
    "hermes-brain-memory==0.1.0",
    "hermes-dreaming==0.3.2",
    "hermes-hy-memory==0.2.8",
    "hermes-kiokuko==0.1.25",
    "hermes-local-rag==1.6.0",
    "hermes-okf==0.5.9",
    "hermes-scope-recall==3.15.1",
    "hermesguardian==0.1.0",
    "keepsake-memory==1.1.1",
    "knos-hermes==0.1.0",
]

#: plugins that install only as a Hermes folder plugin, and the Python that writes the folder
#: with the plugin's own installer (``FOLDER`` is the target folder)
FOLDER_INSTALLERS: dict[str, str] = {
    "hermes-local-memory": textwrap.dedent("""
        import hermes_local_memory
        from pathlib import Path
        from hermes_local_memory.hermes_plugin import write_plugin_shim
        write_plugin_shim(FOLDER / "local_memory",
                          package_root=Path(hermes_local_memory.__file__).resolve().parent.parent)
    """),
}

TRANSCRIPT = [
    {"role": "user", "content": "Hi, I'm Priya; I run the data team in Rotterdam."},
    {"role": "assistant", "content": "Nice to meet you, Priya."},
    {"role": "user", "content": "Which city is my team in?"},
    {"role": "assistant", "content": "Rotterdam."},
]


@dataclass
class Outcome:
    requirement: str
    installed: bool = False
    names: list[str] = field(default_factory=list)
    loads: bool = False
    registers: bool = False
    status: str = ""
    survives: bool = False
    reason: str = ""

    @property
    def runs(self) -> bool:
        return self.loads and self.registers and self.survives


def sh(cmd: list[str], *, env: dict[str, str] | None = None, timeout: float = 900
       ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def ensure_venv(where: Path) -> Path:
    python = where / "bin" / "python"
    if not python.exists():
        venv.create(where, with_pip=True)
        out = sh([str(python), "-m", "pip", "install", "--quiet", str(ROOT),
                  str(ROOT / "plugins" / "hermes_compat")])
        if out.returncode:
            sys.exit(f"installing hermes-core and the bridge failed:\n{out.stderr[-3000:]}")
    else:  # a reused venv gets this checkout's bridge
        sh([str(python), "-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps",
            str(ROOT / "plugins" / "hermes_compat")])
    return python


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def try_plugin(python: Path, requirement: str) -> Outcome:
    result = Outcome(requirement)
    dist = requirement.split("==")[0]
    try:
        out = sh([str(python), "-m", "pip", "install", "--quiet", requirement])
    except subprocess.TimeoutExpired:
        result.reason = "pip install took longer than 15 minutes (a dependency such as torch)"
        return result
    if out.returncode:
        result.reason = f"pip install failed: {last_line(out.stderr)}"
        return result
    result.installed = True
    with tempfile.TemporaryDirectory() as tmp:
        user, core = Path(tmp) / "home", Path(tmp) / "core"
        user.mkdir()
        core.mkdir()
        env = {**os.environ, "HOME": str(user), "HERMES_CORE_HOME": str(core)}
        for name in ("HERMES_HOME", "HERMES_CORE_HERMES_HOME", "ANTHROPIC_API_KEY"):
            env.pop(name, None)
        installer = FOLDER_INSTALLERS.get(dist)
        if installer:
            code = f"from pathlib import Path\nFOLDER = Path({str(core / 'hermes-plugins')!r})\n" + installer
            sh([str(python), "-c", code], env=env)
        hermes = str(python.parent / "hermes-core")
        listed = sh([hermes, "hermes", "plugins", "--json"], env=env, timeout=300)
        if listed.returncode:
            result.reason = f"hermes plugins failed: {last_line(listed.stderr)}"
            return result
        mine = [p for p in json.loads(listed.stdout)["plugins"]
                if (p.get("distribution") or "").lower().replace("_", "-") == dist.lower()
                or (installer and p["source"] == "folder")]
        if not mine:
            result.reason = ("no Hermes entry point and no folder: it installs as a folder plugin "
                             "through its own installer command, which this script does not run")
            return result
        result.names = [p["name"] for p in mine]
        usable = [p for p in mine if p["status"] != "failed"]
        result.loads = bool(usable)
        if not usable:
            result.status = "failed"
            result.reason = mine[0]["detail"] + (f" (fix: {mine[0]['fix']})" if mine[0]["fix"] else "")
            return result
        plugin = next((p for p in usable if p["status"] == "ready"), usable[0])
        result.registers = True
        result.status = plugin["status"]
        if plugin["status"] != "ready":
            result.reason = f"{plugin['status']}: {plugin['detail']}"
            return result
        transcript = Path(tmp) / "t.jsonl"
        transcript.write_text("\n".join(json.dumps(line) for line in TRANSCRIPT), encoding="utf-8")
        if plugin["kind"] == "context-engine":
            config = f"context:\n  engine: {plugin['name']}\n"
        else:
            config = f"memory:\n  providers: [file_memory, {plugin['name']}]\n"
        config += "hooks:\n  timeouts:\n    system_prompt_block: 60\n    on_message: 60\n"
        (core / "config.yaml").write_text(config, encoding="utf-8")
        replay = sh([hermes, "replay", str(transcript), "--json"], env=env, timeout=600)
        if replay.returncode:
            result.reason = f"replay exited {replay.returncode}: {last_line(replay.stderr)}"
            return result
        report = json.loads(replay.stdout)
        problems = [p for t in report["turns"] for p in t["hook_problems"]
                    if plugin["name"] in p["plugin"]]
        if problems:
            result.reason = f"hook problems in the replay: {problems[0]['message'][:300]}"
            return result
        result.survives = True
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--venv", type=Path, help="reuse (or create) this venv")
    parser.add_argument("--only", nargs="*", default=None, help="distribution names to try")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    chosen = [r for r in PLUGINS if args.only is None or r.split("==")[0] in args.only]
    with tempfile.TemporaryDirectory() as tmp:
        python = ensure_venv(args.venv or Path(tmp) / "venv")
        outcomes = []
        for requirement in chosen:
            try:
                outcome = try_plugin(python, requirement)
            except (subprocess.TimeoutExpired, ValueError, KeyError) as exc:  # a hung or odd run
                outcome = Outcome(requirement, reason=f"{type(exc).__name__}: {exc}"[:300])
            outcomes.append(outcome)
            if not args.json:
                mark = "runs" if outcome.runs else "does not run"
                print(f"{requirement:<34} loads={outcome.loads!s:<5} registers={outcome.registers!s:<5} "
                      f"survives={outcome.survives!s:<5} {mark}", flush=True)
                if outcome.reason:
                    print(f"    why: {outcome.reason}", flush=True)
    running = sum(o.runs for o in outcomes)
    share = running / len(outcomes) if outcomes else 0.0
    if args.json:
        print(json.dumps({"plugins": [asdict(o) | {"runs": o.runs} for o in outcomes],
                          "running": running, "total": len(outcomes)}, indent=2))
        return
    print(f"\n{running} of {len(outcomes)} run unchanged ({share:.0%}); target >= 80 %: "
          f"ratio to target {share / 0.8:.2f}")


if __name__ == "__main__":
    main()
