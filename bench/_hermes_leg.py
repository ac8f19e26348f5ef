"""The Hermes leg of ``bench/hermes_plugin_coverage.py``: does a plugin run in Hermes Agent 0.19.0?

Two halves in one file, both standard library only at import time:

* :func:`run_leg` runs in the coverage script's Python: it installs the plugin into a venv that
  has the real ``hermes-agent==0.19.0`` and no hermes-core, sets up a fresh ``HOME`` with
  ``HERMES_HOME=$HOME/.hermes`` the way the coverage run sets up the hermes-core leg (the same
  tables: pre-installs, user files and commands, the plugin's own installer), and runs this file
  there as a subprocess;
* ``python _hermes_leg.py DIST`` (in that venv) drives the plugin the way Hermes 0.19.0 does, with
  Hermes' own code, and prints one JSON line after :data:`MARK`.

How Hermes 0.19.0 drives a plugin (read from its sources):

* a **memory provider** is loaded only from a folder (``plugins/memory/__init__.py``: bundled, or
  ``$HERMES_HOME/plugins/<name>/`` whose ``__init__.py`` mentions ``MemoryProvider`` or
  ``register_memory_provider``) by ``plugins.memory.load_memory_provider(memory.provider)``;
  ``agent.agent_init`` adds it to ``agent.memory_manager.MemoryManager`` when ``is_available()``
  and calls ``initialize_all`` with the session id, ``platform``, ``hermes_home``,
  ``agent_context``, ``agent_identity`` (the profile name) and ``agent_workspace``; a turn calls
  ``on_turn_start``, ``prefetch_all``, ``sync_all`` and ``queue_prefetch_all``; the end of a
  session ``on_session_end`` and ``shutdown_all``. A plugin with no installer of its own is put in
  that folder as its README says a user does: its package folder linked there (or, for an entry
  point inside a package, a one-line folder importing its ``register``);
* a **general plugin** (hooks, tools, commands) is found by ``hermes_cli.plugins.PluginManager``
  (entry-point group ``hermes_agent.plugins`` and ``$HERMES_HOME/plugins/``) and loaded only when
  named in ``plugins.enabled`` (``hermes plugins enable``); its hooks run through
  ``invoke_hook``, its tools through ``model_tools.handle_function_call`` (which fires
  ``pre_tool_call``/``post_tool_call``);
* a **context engine** registered by ``ctx.register_context_engine`` is selected by
  ``context.engine``; the agent calls ``update_model``, ``on_session_start``,
  ``should_compress`` and ``compress``.

A plugin runs in Hermes when something of it loaded and registered, a provider is available,
no call raised (Hermes catches and logs what a plugin raises: those log lines are counted), and
each read-only tool called answered without an error. The plugin's own warnings and errors are
printed, not counted, as the hermes-core leg counts what the bridge reports.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

MARK = "HERMES-LEG-RESULT "
HERMES_AGENT = "hermes-agent==0.19.0"
MEMORY_GROUPS = ("hermes_agent.memory_providers", "hermes.memory_provider",
                 "hermes.memory_providers")
PLUGIN_GROUP = "hermes_agent.plugins"

#: installers that take other paths for Hermes than for the bridge (the coverage script's
#: FOLDER_INSTALLERS are used otherwise, with FOLDER = ``$HERMES_HOME/plugins``)
HERMES_INSTALLERS: dict[str, str] = {
    # its README's apply-install with Hermes' own home as the instance root and its wrapper
    # folder in Hermes' plugins folder (Hermes 0.19.0 reads no memory-provider entry point)
    "hermes-scope-recall": """
import sys
from scope_recall.maintenance.cli import main
assert main(["apply-install", "--host", "hermes",
             "--target-plugin-dir", str(HERMES_HOME_DIR / "plugins" / "scope-recall"),
             "--instance-root", str(HERMES_HOME_DIR), "--project-root", str(WORK),
             "--agent-id", "default", "--python", sys.executable]) == 0
""",
}

#: files a user of the plugin writes as its README says, for Hermes (the hermes-core leg never gets
#: that far with these)
HERMES_USER_FILES: dict[str, dict[str, str]] = {
    # its README's configuration: the agent identity its initialize() requires (its Redis
    # server, 127.0.0.1:6379 by default, with the RediSearch module, is a service)
    "keepsake-memory": {".config/keepsake/config.json": '{"agent_id": "main-brain"}\n'},
}

#: the plugin's own command that puts it where Hermes 0.19.0 loads it, as its README gives it
#: (console scripts of its distribution; ``{python}`` is the Hermes venv's interpreter)
#: (hermes-itsuki's `hermes-itsuki install`, which copies its package folder there, looks for a
#: Hermes installation under /usr/local/lib/hermes-agent and stops without one: its folder is
#: linked as for the plugins without an installer)
HERMES_COMMANDS: dict[str, list[list[str]]] = {
    "hermes-okf": [["hermes-okf", "install-plugin"]],
    "mnemosyne-hermes": [["mnemosyne-hermes", "install", "--no-profile-links", "--no-bootstrap",
                          "--python", "{python}"]],
    # "writes $HERMES_HOME/plugins/pgvector/ (older hosts only)": 0.19.0 is one
    "hermes-memory-pgvector": [["hermes-pgvector", "install"]],
}
#: the plugin's settings in Hermes' config.yaml, as the hermes-core leg's config section gives
#: them (``{model}`` as there)
HERMES_CONFIG: dict[str, str] = {
    # it reads plugins.kv-memory; its default model would be fetched from a model hub
    "hermes-semantic-memory": "plugins:\n  kv-memory:\n    embedding_backend: "
                              "sentence-transformers\n    embedding_model: {model}\n",
}
#: read-only tools of a plugin the hermes-core leg does not call (its TOOL_CALLS are called too)
HERMES_TOOL_CALLS: dict[str, list[list[Any]]] = {
    # its runtime's own health report
    "forge-hermes-plugin": [["forge_get_doctor", {}]],
}

# --------------------------------------------------------------------------- host side


def ensure_venv(where: Path) -> Path:
    """A venv with hermes-agent 0.19.0 and without hermes-core."""
    import venv

    python = where / "bin" / "python"
    if not python.exists():
        venv.create(where, with_pip=True)
    check = subprocess.run([str(python), "-c", "import hermes_cli, agent.memory_manager"],
                           capture_output=True)
    if check.returncode:
        out = subprocess.run([str(python), "-m", "pip", "install", "--quiet", HERMES_AGENT],
                             capture_output=True, text=True, timeout=1800)
        if out.returncode:
            sys.exit(f"installing {HERMES_AGENT} failed:\n{out.stderr[-3000:]}")
    if not subprocess.run([str(python), "-c", "import hermes_core"],
                          capture_output=True).returncode:
        sys.exit(f"{where} has hermes-core installed: the Hermes leg needs a venv without it")
    return python


def run_leg(python: Path, requirement: str, cov: ModuleType) -> dict[str, Any]:
    """Install ``requirement`` into the Hermes venv and drive it as Hermes 0.19.0 does."""
    dist = requirement.split("==")[0]
    for pre in cov.PRE_INSTALL.get(dist, []):
        out = cov.sh([str(python), "-m", "pip", "install", "--quiet", *pre])
        if out.returncode:
            return {"runs": False, "reason": f"pip install {' '.join(pre)} failed: "
                                             f"{cov.last_line(out.stderr)}"}
    out = cov.sh([str(python), "-m", "pip", "install", "--quiet", requirement])
    if out.returncode:
        return {"runs": False, "reason": f"pip install failed: {cov.last_line(out.stderr)}"}
    with tempfile.TemporaryDirectory() as tmp:
        user, work = Path(tmp) / "home", Path(tmp) / "work"
        home = user / ".hermes"
        for folder in (home, work):
            folder.mkdir(parents=True)
        env = {**os.environ, "HOME": str(user), "HERMES_HOME": str(home)}
        for name in ("HERMES_CORE_HOME", "HERMES_CORE_HERMES_HOME", "ANTHROPIC_API_KEY"):
            env.pop(name, None)
        files = {**cov.USER_FILES.get(dist, {}), **HERMES_USER_FILES.get(dist, {})}
        reason = cov.prepare_user(python, dist, user, work, env, files)
        if reason:
            return {"runs": False, "reason": reason}
        if dist in HERMES_CONFIG:
            with (home / "config.yaml").open("a", encoding="utf-8") as config:
                config.write(HERMES_CONFIG[dist].format(model=cov.model_folder(python)))
        installer = HERMES_INSTALLERS.get(dist) or cov.FOLDER_INSTALLERS.get(dist)
        if installer:
            code = (f"from pathlib import Path\nFOLDER = Path({str(home / 'plugins')!r})\n"
                    f"HERMES_HOME_DIR = Path({str(home)!r})\n"
                    f"CORE = Path({str(Path(tmp) / 'core')!r})\nWORK = Path({str(work)!r})\n"
                    + installer)
            out = cov.sh([str(python), "-c", code], env=env, cwd=work)
            if out.returncode:
                return {"runs": False,
                        "reason": f"its installer failed: {cov.last_line(out.stderr)}"}
        for command in HERMES_COMMANDS.get(dist, []):
            words = [w.format(python=python) for w in command]
            out = cov.sh([str(python.parent / words[0]), *words[1:]], env=env, timeout=600,
                         cwd=work)
            if out.returncode:
                return {"runs": False, "reason": f"`{' '.join(command)}` failed: "
                                                 f"{cov.last_line(out.stderr or out.stdout)}"}
            installer = installer or f"`{' '.join(command)}`"
        calls = [[name, args] for name, args in cov.TOOL_CALLS.get(dist, [])]
        calls += HERMES_TOOL_CALLS.get(dist, [])
        # the read-only arguments the hermes-core leg gives a slash command (none otherwise)
        slash = {words[1]: " ".join(words[2:]) for key, words in cov.COMMAND_CALLS.items()
                 if " slash " in key}
        driven = cov.sh([str(python), __file__, dist, "--tools", json.dumps(calls),
                         "--slash", json.dumps(slash),
                         *(["--installed"] if installer else [])],
                        env=env, timeout=900, cwd=work)
        lines = [line for line in driven.stdout.splitlines() if line.startswith(MARK)]
        if not lines:
            return {"runs": False, "reason": f"the driver exited {driven.returncode}: "
                                             f"{cov.last_line(driven.stderr or driven.stdout)}"}
        result: dict[str, Any] = json.loads(lines[-1][len(MARK):])
        if installer:
            result["placed"] = ("its own installer" + (f": {installer}" if installer.startswith("`")
                                                       else " (as in the hermes-core leg)"))
        return result


# --------------------------------------------------------------------------- venv side


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


#: Hermes' own loggers whose warnings are about the plugin (a callback or provider call that
#: raised, a load that failed, a prefetch past Hermes' 8 s join); other Hermes loggers warn about
#: Hermes itself
_HERMES_ABOUT_PLUGIN = ("agent.memory_manager", "plugins.memory", "hermes_cli.plugins",
                        "model_tools", "tools.registry", "agent.context_engine")
_PLUGIN_NAMESPACES = ("plugins.memory.", "plugins.context_engine.", "hermes_plugins.",
                      "_hermes_user_memory.")
_HERMES_OWN = ("agent", "hermes_cli", "plugins", "tools", "model_tools", "run_agent", "gateway",
               "cron", "toolsets", "hermes_constants", "hermes_state", "hermes_logging", "cli",
               "utils", "providers", "tui_gateway", "acp_adapter", "httpx", "httpcore", "urllib3",
               "asyncio", "filelock")


#: what Hermes logs only at debug level when a plugin raised: a provider's prefetch or
#: queue_prefetch, its register() or its module under the folder loader
_DEBUG_FAILURES = ("prefetch failed", "register() failed", "Failed to exec_module")


def _problems(records: list[logging.LogRecord], warned: list[str]) -> list[str]:
    """What Hermes logged of the plugin failing (a call that raised, a load that failed).

    The plugin's own warnings and errors (a degraded mode it reports and goes on with) go to
    ``warned``: listed, not counted, as the hermes-core leg counts what the bridge reports."""
    out: list[str] = []
    for record in records:
        name = record.name
        about = name in _HERMES_ABOUT_PLUGIN
        # a plugin's module under Hermes' own namespaces (plugins/memory/<it>) logs as the plugin
        own = not about and not name.startswith(_PLUGIN_NAMESPACES) and any(
            name == n or name.startswith(n + ".") for n in _HERMES_OWN)
        message = record.getMessage()
        if about and (record.levelno >= logging.WARNING
                      or any(k in message for k in _DEBUG_FAILURES)):
            out.append(f"{name}: {message}")
        elif record.levelno >= logging.WARNING and not own:
            warned.append(f"{name}: {message}")
    return list(dict.fromkeys(m[:300] for m in out))


def _memory_entry_points(dist: str) -> list[Any]:
    """Its memory-provider entry points (and ``hermes_agent.plugins`` ones registering one)."""
    from importlib import metadata, util

    d = metadata.distribution(dist)
    eps = [ep for ep in d.entry_points if ep.group in MEMORY_GROUPS]
    for ep in d.entry_points:
        if ep.group == PLUGIN_GROUP and ep not in eps:
            spec = util.find_spec(ep.module)
            origin = spec.origin if spec else None
            if origin and "register_memory_provider" in Path(origin).read_text(errors="replace"):
                eps.append(ep)
    return eps


def _place_folder(dist: str, home: Path) -> tuple[str, Path | None]:
    """Put a pip-installed memory provider where Hermes 0.19.0 looks; return how."""
    from importlib import metadata, util

    plugins = home / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    d = metadata.distribution(dist)
    eps = _memory_entry_points(dist)
    if not eps and any(ep.group == PLUGIN_GROUP for ep in d.entry_points):
        return "", None  # a general plugin: PluginManager finds it by its entry point
    if not eps:
        tops = (d.read_text("top_level.txt") or "").split()
        if not tops:
            return "", None
        target = plugins / tops[0]
        spec = util.find_spec(tops[0])
        if spec is None or not spec.submodule_search_locations:
            return "", None
        target.symlink_to(next(iter(spec.submodule_search_locations)), target_is_directory=True)
        return f"no entry point: its package folder {tops[0]}/ linked to plugins/{tops[0]}/", target
    ep = eps[0]
    if ep.module.startswith("plugins.memory."):  # its wheel installs into Hermes' own folder
        return f"its wheel puts it in Hermes' own {ep.module.replace('.', '/')}/", None
    spec = util.find_spec(ep.module)
    if spec is None:
        return "", None
    target = plugins / ep.name
    if spec.submodule_search_locations:  # a package: link its folder
        target.symlink_to(next(iter(spec.submodule_search_locations)), target_is_directory=True)
        return f"its package folder {ep.module}/ linked to plugins/{ep.name}/", target
    target.mkdir()
    (target / "__init__.py").write_text(
        f'"""Hermes MemoryProvider plugin folder for {dist} (its entry point {ep.value})."""\n'
        f"from {ep.module} import {ep.attr or 'register'}\n", encoding="utf-8")
    return f"a folder plugins/{ep.name}/ importing its entry point {ep.value}", target


def _write_config(home: Path, updates: dict[str, Any]) -> None:
    import yaml

    path = home / "config.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None
    data = data if isinstance(data, dict) else {}
    for section, values in updates.items():
        current = data.get(section)
        data[section] = {**(current if isinstance(current, dict) else {}), **values}
    path.write_text(yaml.safe_dump(data), encoding="utf-8")


TURNS = [("Hi, I'm Priya; I run the data team in Rotterdam.", "Nice to meet you, Priya."),
         ("Which city is my team in?", "Rotterdam.")]


def _memory_leg(name: str, out: dict[str, Any], calls: list[list[Any]]) -> str:
    """Drive provider ``name`` as ``AIAgent`` does; return the reason it does not run, or ''."""
    from agent.memory_manager import MemoryManager
    from hermes_cli.profiles import get_active_profile_name
    from hermes_constants import get_hermes_home

    from plugins.memory import load_memory_provider

    provider = load_memory_provider(name)
    if provider is None:
        return f"plugins.memory.load_memory_provider({name!r}) found no provider"
    out["provider"] = getattr(provider, "name", name)
    if not provider.is_available():
        return "its is_available() is False"
    manager = MemoryManager()
    manager.add_provider(provider)
    session = f"{time.strftime('%Y%m%d_%H%M%S')}_{uuid.uuid4().hex[:6]}"
    notes: list[str] = []
    manager.initialize_all(session_id=session, platform="cli", hermes_home=str(get_hermes_home()),
                           agent_context="primary", warning_callback=notes.append,
                           status_callback=lambda *_a, **_k: None,
                           agent_identity=get_active_profile_name(), agent_workspace="hermes")
    manager.build_system_prompt()
    messages: list[dict[str, Any]] = []
    recalled = 0
    for number, (user, assistant) in enumerate(TURNS, 1):
        manager.on_turn_start(number, user)
        recalled += len(manager.prefetch_all(user, session_id=session) or "")
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        manager.sync_all(user, assistant, session_id=session, messages=list(messages))
        manager.queue_prefetch_all(user, session_id=session)
        manager.flush_pending(timeout=60)
    for tool, args in calls:
        if manager.has_tool(tool):
            answer = manager.handle_tool_call(tool, args)
            out.setdefault("tools", []).append(f"{tool}: {str(answer)[:120]}")
    manager.on_session_end(messages)
    manager.shutdown_all()
    out["recalled_chars"] = recalled
    if notes:
        return "it warned: " + "; ".join(str(n) for n in notes)[:300]
    return ""


def _general_leg(keys: set[str], out: dict[str, Any], calls: list[list[Any]],
                 slash: dict[str, str], work: Path) -> str:
    from hermes_cli.plugins import (
        get_plugin_command_handler,
        get_plugin_manager,
        invoke_hook,
        resolve_plugin_command_result,
    )
    from model_tools import handle_function_call

    manager = get_plugin_manager()
    manager.discover_and_load()
    mine = {k: p for k, p in manager._plugins.items() if k in keys or p.manifest.name in keys}
    reasons: list[str] = []
    registered: list[str] = []
    for key, loaded in mine.items():
        if loaded.error:
            reasons.append(f"plugin {key}: {' '.join(str(loaded.error).split())[:300]}")
        registered += [f"hook {h}" for h in loaded.hooks_registered]
        registered += [f"tool {t}" for t in loaded.tools_registered]
        registered += [f"command /{c}" for c in loaded.commands_registered]
        registered += [f"middleware {m}" for m in loaded.middleware_registered]
    out["general"] = sorted(mine)
    out["registered"] = registered
    engine = manager._context_engine
    if not mine or (not registered and engine is None):
        return "; ".join(reasons) or "loaded, registered nothing"
    session = f"{time.strftime('%Y%m%d_%H%M%S')}_{uuid.uuid4().hex[:6]}"
    model, history = "claude-sonnet-4", []
    common = {"session_id": session, "model": model, "platform": "cli"}
    invoke_hook("on_session_start", **common)
    for number, (user, assistant) in enumerate(TURNS, 1):
        turn = {"task_id": session, "turn_id": f"{session}:{number}"}
        invoke_hook("pre_llm_call", **common, **turn, user_message=user,
                    conversation_history=list(history), is_first_turn=number == 1, sender_id="")
        if number == len(TURNS):
            (work / "notes.txt").write_text("Priya's team: Rotterdam\n", encoding="utf-8")
            tools = {t for loaded in mine.values() for t in loaded.tools_registered}
            for tool, _args in calls:
                if tool not in tools:  # e.g. the bridge's <plugin>_skill tool for its skills
                    out.setdefault("tools", []).append(f"{tool}: not a tool it registers here")
            mine_calls = [c for c in calls if c[0] in tools]
            for tool, args in [*mine_calls, ["read_file", {"path": str(work / "notes.txt")}]]:
                answer = handle_function_call(tool, dict(args), task_id=session,
                                              session_id=session, tool_call_id=uuid.uuid4().hex,
                                              turn_id=turn["turn_id"])
                out.setdefault("tools", []).append(f"{tool}: {str(answer)[:160]}")
                try:
                    parsed = json.loads(answer)
                except ValueError:
                    parsed = None
                if isinstance(parsed, dict) and parsed.get("error") and tool != "read_file":
                    reasons.append(f"tool {tool} answered an error: {str(parsed['error'])[:200]}")
        history += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        invoke_hook("post_llm_call", **common, **turn, user_message=user,
                    assistant_response=assistant, conversation_history=list(history))
    if engine is not None:
        out["engine"] = engine.name
        engine.update_model(model=model, context_length=200_000)
        engine.on_session_start(session, hermes_home=os.environ["HERMES_HOME"], platform="cli",
                                model=model, context_length=200_000, conversation_id=None)
        engine.should_compress(1_000)
        engine.compress([{"role": "system", "content": "You are helpful."}, *history * 6],
                        current_tokens=1_000)
        engine.on_session_end(session, history)
    for loaded in mine.values():  # its slash commands, as the CLI runs `/name args`
        for command in loaded.commands_registered:
            handler = get_plugin_command_handler(command)
            try:
                answer = resolve_plugin_command_result(handler(slash.get(command, "")))
                out.setdefault("commands", []).append(f"/{command}: {str(answer)[:120]}")
            except Exception as exc:  # the CLI prints "Plugin command error"
                reasons.append(f"/{command} {slash.get(command, '')} raised "
                               f"{type(exc).__name__}: {exc}"[:300])
    invoke_hook("on_session_end", **common, task_id=session, turn_id=f"{session}:end",
                completed=True, interrupted=False)
    return "; ".join(reasons)


def drive(dist: str, calls: list[list[Any]], slash: dict[str, str],
          installed: bool) -> dict[str, Any]:
    from importlib import metadata

    records = _Records()
    logging.getLogger().addHandler(records)
    logging.getLogger().setLevel(logging.DEBUG)
    home = Path(os.environ["HERMES_HOME"])
    out: dict[str, Any] = {"runs": False}
    placed, target = ("", None) if installed else _place_folder(dist, home)
    if placed:
        out["placed"] = placed
    from plugins.memory import list_memory_provider_names

    # its providers: folders in $HERMES_HOME/plugins, or in Hermes' own plugins/memory/ when
    # its wheel installs there (hermes-cashew; the venv may hold other plugins' ones too)
    own = {f.parts[2] for f in metadata.distribution(dist).files or []
           if f.parts[:2] == ("plugins", "memory") and len(f.parts) > 3}
    user = {p.name for p in (home / "plugins").glob("*")}
    memory = [n for n in list_memory_provider_names() if n in own | user]
    if target is not None and not memory:  # Hermes' folder scan does not take it as a provider
        if target.is_symlink():
            target.unlink()
        else:
            shutil.rmtree(target)
        out["placed"] = f"{placed}, which Hermes' memory scan does not take (so removed)"
    # its general plugins, each enabled as `hermes plugins enable NAME` does
    keys = {ep.name for ep in metadata.distribution(dist).entry_points if ep.group == PLUGIN_GROUP}
    if memory:  # the entry point registering that provider: Hermes 0.19.0 takes it from the folder
        same = keys & {ep.name for ep in _memory_entry_points(dist)}
        if same:
            keys -= same
            out["also"] = (f"not enabled as a general plugin: {sorted(same)} (its register() gives "
                           "the memory provider, which Hermes 0.19.0 loads from the folder)")
    keys |= {p.name for p in (home / "plugins").glob("*")
             if (p / "plugin.yaml").exists() and p.name not in memory}
    config: dict[str, Any] = {"plugins": {"enabled": sorted(keys)}}
    if memory:
        config["memory"] = {"provider": memory[0]}
    _write_config(home, config)
    reasons: list[str] = []
    try:
        if memory:
            out["memory"] = memory[0]
            reason = _memory_leg(memory[0], out, calls)
            if reason:
                reasons.append(reason)
        if keys:
            reason = _general_leg(keys, out, calls, slash, Path.cwd())
            if reason:
                reasons.append(reason)
        if not memory and not keys:
            reasons.append("Hermes 0.19.0 finds nothing of it: no folder in $HERMES_HOME/plugins "
                           "and no hermes_agent.plugins entry point")
    except Exception as exc:  # a call Hermes would have made raised out of Hermes' own code
        reasons.append(f"{type(exc).__name__}: {exc}"[:300])
    warned: list[str] = []
    problems = _problems(records.records, warned)
    if problems:
        reasons.append("logged: " + " | ".join(problems[:3]))
    if warned:
        out["warned"] = [" ".join(w.split())[:200] for w in dict.fromkeys(warned)][:3]
    out["runs"] = not reasons
    out["reason"] = " ".join("; ".join(reasons).split())[:900]
    return out


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("dist")
    parser.add_argument("--tools", default="[]")
    parser.add_argument("--slash", default="{}")
    parser.add_argument("--installed", action="store_true")
    args = parser.parse_args()
    result = drive(args.dist, json.loads(args.tools), json.loads(args.slash), args.installed)
    print(MARK + json.dumps(result), flush=True)
    os._exit(0)  # a provider's worker thread must not hold the process open


if __name__ == "__main__":
    main()


# --------------------------------------------------------------------------- figures (host side)

#: the plugins docs/hermes.md's coverage table measured as running unchanged in hermes-core
#: (16 of the 25 of PLUGINS, 2 of the 3 of EXTENDED): used for a row whose hermes-core leg this
#: run does not measure again (``--skip-core-leg``), and said so in the output
DOCUMENTED_CORE_RUNS = {
    "hermes-local-memory", "hermes-llmwiki", "hermes-cashew", "verbatim-memory",
    "hermes-semantic-memory", "lossless-hermes-py", "mnemosyne-hermes", "hermes-okf",
    "hermes-scope-recall", "hermesguardian", "knos-hermes", "nyx-memory", "openwolf-hermes",
    "yantrikdb-hermes-plugin", "hyatlas-memory", "hermes-memory-pgvector",
    "memex-hermes", "hologram-cognitive",
}


def print_row(requirement: str, leg: dict[str, Any], core_runs: bool | None) -> None:
    """Its Hermes leg (before its hermes-core leg's lines, when that leg runs too)."""
    core = ("not run again (docs: " + ("runs" if requirement.split("==")[0]
                                       in DOCUMENTED_CORE_RUNS else "does not run") + ")"
            if core_runs is None else "runs" if core_runs else "does not run")
    print(f"{requirement}  runs in Hermes 0.19.0: {'yes' if leg.get('runs') else 'no'}; "
          f"in hermes-core: {core}", flush=True)
    for key in ("placed", "memory", "general", "engine", "tools", "commands", "also", "warned"):
        if leg.get(key):
            print(f"      {key}: {leg[key]}", flush=True)
    if leg.get("reason"):
        print(f"      why not in Hermes: {leg['reason']}", flush=True)


def print_figures(rows: list[tuple[str, dict[str, Any], bool | None]], listed: list[str]) -> None:
    """How many run in Hermes 0.19.0, and of those, how many run in hermes-core."""
    for label, chosen in (("of the list", [r for r in rows if r[0] in listed]),
                          ("with the extended list", rows)):
        if not chosen or (label != "of the list" and len(chosen) == len(
                [r for r in rows if r[0] in listed])):
            continue
        in_hermes = [(r, core) for r, leg, core in chosen if leg.get("runs")]
        both = sum(bool(core) if core is not None else r.split("==")[0] in DOCUMENTED_CORE_RUNS
                   for r, core in in_hermes)
        print(f"{len(in_hermes)} of {len(chosen)} run in Hermes 0.19.0 itself {label}; of those "
              f"{len(in_hermes)}, {both} run unchanged in hermes-core"
              + (f" ({both / len(in_hermes):.0%})" if in_hermes else ""))
    documented = [r for r, _leg, core in rows if core is None]
    if documented:
        print(f"(hermes-core's leg was not run again for {len(documented)} row(s): its result "
              "is taken from the table of docs/hermes.md)")
