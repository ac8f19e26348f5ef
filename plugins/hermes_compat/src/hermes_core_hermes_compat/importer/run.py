"""``hermes-core import hermes``: the whole import, as a library function.

Everything is read and checked first (the home, all of state.db, the memory files, the skills);
only then is anything written, so a corrupt or foreign file changes nothing in this home. Each
part goes through a public way in: the sessions through the ``import_sessions`` hook (the
session archive, on either backend), the memory and skills through the tools whose curation roles
are ``memory`` and ``procedures``, the provider through config.yaml validated by the loaded host.
Every part skips what is already there, so a second run adds nothing.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_core.storage import resolve_storage_url
from hermes_core.storage.transfer import CopyProgress, StorageSide, merge_reports

from .home import HermesHome, HermesImportError, link_out, open_home
from .memory import FILES, MemoryImport, import_memory, read_entries
from .skills import SkillsImport, import_skills
from .statedb import StateDbSummary, convert, count_messages

if TYPE_CHECKING:
    from hermes_core.host import PluginHost
    from hermes_core.kinds import Tool

__all__ = ["HermesImportError", "HermesImportReport", "import_hermes"]


@dataclass
class HermesImportReport:
    source: str
    dry_run: bool
    sessions: dict[str, Any] = field(default_factory=dict)
    memory: list[MemoryImport] = field(default_factory=list)
    skills: SkillsImport = field(default_factory=SkillsImport)
    provider: dict[str, Any] = field(default_factory=dict)
    #: problems the user must act on (each names the file or setting and the fix)
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "dry_run": self.dry_run, "sessions": self.sessions,
                "memory": [m.to_dict() for m in self.memory], "skills": self.skills.to_dict(),
                "provider": self.provider, "problems": self.problems}


def _curated(host: PluginHost, role: str) -> tuple[Tool, str] | None:
    for tool, plugin in host.tools().values():
        if tool.curation is not None and tool.curation.role == role:
            return tool, plugin
    return None


def _read_sessions(home: HermesHome, progress: CopyProgress, workdir: Path,
                   report: HermesImportReport) -> Path | None:
    """Read state.db into an export-format file in ``workdir`` (private to this user, deleted
    afterwards); nothing is written to this home yet."""
    if not home.state_db.exists():
        report.sessions = {"note": f"no state.db in {home.root}"}
        return None
    total = count_messages(home.state_db)
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        if done % 500 == 0 or done >= total:
            progress("reading state.db", done, total)

    progress("reading state.db", 0, total)
    path = workdir / "sessions.jsonl"
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as out:
        summary: StateDbSummary = convert(home.state_db, out, progress=advance)
    progress("reading state.db", total, total)
    report.sessions = {"found": {"sessions": summary.sessions, "messages": summary.messages},
                       "left": summary.left}
    return path


def _store_sessions(host: PluginHost, path: Path, dry_run: bool, progress: CopyProgress,
                    report: HermesImportReport) -> None:
    target = StorageSide(home=host.home, config=host.config,
                         url=resolve_storage_url(host.config.core.storage.url))
    merged = merge_reports(host.hooks.import_sessions(target=target, path=path, dry_run=dry_run,
                                                      progress=progress))
    report.sessions.update({"imported": merged["copied"], "already_there": merged["skipped"]})
    if not merged["plugins"] and not merged["errors"]:
        report.problems.append(
            "no loaded plugin keeps a session archive, so no session was imported: enable the "
            "session_archive plugin ('hermes-core plugins enable session_archive') and run the "
            "import again")
    for error in merged["errors"]:
        report.problems.append(f"sessions: plugin {error['plugin']!r} could not import them: "
                               f"{error['error']}. Fix it and run the import again: what is "
                               "already there is skipped")


def _memory(host: PluginHost, home: HermesHome, dry_run: bool,
            report: HermesImportReport) -> None:
    tool = None if dry_run else _curated(host, "memory")
    for name, target in FILES.items():
        path = home.memories / name
        if not path.exists():
            continue
        if (why := link_out(path, home.root)) is not None:
            report.problems.append(why)
            continue
        if dry_run:
            entries = read_entries(path)
            report.memory.append(MemoryImport(target, name, len(entries), added=entries))
            continue
        part = import_memory(tool, path, target)
        report.memory.append(part)
        if part.refused:
            report.problems.append(
                f"{path}: the memory store refused {len(part.refused)} of its entries on their "
                f"own ({part.refused[0]['reason']}). Edit or remove them in {path}, then run the "
                "import again: entries already stored are skipped")
        room = [left for left in part.left if left not in part.refused]
        if room:
            key = "memory_char_limit" if target == "memory" else "user_char_limit"
            report.problems.append(
                f"{path}: {len(room)} of its {part.entries} entries were not stored "
                f"({room[0]['reason']}). Raise file_memory.{key} in config.yaml or make "
                "room ('hermes-core memory curate'), then run the import again: entries already "
                "stored are skipped")


def _provider(host: PluginHost, home: HermesHome, dry_run: bool,
              report: HermesImportReport) -> None:
    name = home.memory_provider()
    if name is None:
        return
    from ..discovery import kind_name
    from ..hermes_side import PROVIDER_NAME

    if name == PROVIDER_NAME:  # Hermes was served by hermes-core's own stack: nothing to add
        report.provider = {"hermes": name, "provider": None, "status": "hermes-core itself"}
        return
    mapped = kind_name(name)  # the name the bridge gives that Hermes plugin
    selected = list(host.config.core.memory.providers)
    report.provider = {"hermes": name, "provider": mapped}
    if mapped in selected:
        report.provider["status"] = "already selected"
        return
    if mapped not in host.registries.memory_providers.names():
        report.provider["status"] = "not installed"
        report.problems.append(
            f"Hermes used the memory provider {name!r}; no Hermes plugin of that name is installed "
            f"here, so {mapped!r} was not added to memory.providers. Install the plugin "
            "(pip install it, or copy its folder into $HERMES_CORE_HOME/hermes-plugins/), check "
            "it with 'hermes-core hermes plugins', then run the import again")
        return
    if dry_run:
        report.provider["status"] = "would be added"
        return
    from hermes_core.config import file_values_only, parse_config_text
    from hermes_core.config_edit import config_lock, set_config_value
    from hermes_core.errors import ConfigError
    from hermes_core.paths import config_path

    path = config_path(host.home)
    try:
        # the list as the file has it now (a `config set` made since the import began is kept),
        # read and written back under config.yaml's lock as one edit
        with config_lock(path):
            text = path.read_text(encoding="utf-8") if path.exists() else ""
            with file_values_only():
                selected = list(parse_config_text(text, path).core.memory.providers)
            if mapped in selected:
                report.provider["status"] = "already selected"
                return
            set_config_value(path, "memory.providers", [*selected, mapped],
                             validate=host.validate_config)
    except ConfigError as exc:
        report.provider["status"] = "not added"
        report.problems.append(f"{mapped!r} was not added to memory.providers: {exc}")
        return
    report.provider["status"] = "added"


def import_hermes(host: PluginHost, source: Path, *, dry_run: bool = False,
                  progress: CopyProgress = lambda task, done, total: None) -> HermesImportReport:
    """Import the Hermes home at ``source`` into ``host``'s home; see the module docstring."""
    home = open_home(source, core_home=host.home)
    report = HermesImportReport(str(home.root), dry_run)
    for name in FILES:  # read and check before anything is written
        path = home.memories / name
        if path.exists() and link_out(path, home.root) is None:
            read_entries(path)
    with tempfile.TemporaryDirectory(prefix="hermes-import-") as tmp:
        sessions_file = _read_sessions(home, progress, Path(tmp), report)
        if not dry_run:
            host.activate_memory_providers()
        if sessions_file is not None:
            _store_sessions(host, sessions_file, dry_run, progress, report)
    _memory(host, home, dry_run, report)
    report.skills = import_skills(None if dry_run else _curated(host, "procedures"),
                                  home.skills, dry_run=dry_run)
    for left in report.skills.left:
        report.problems.append(f"skill {left['skill']!r}: {left['reason']}")
    _provider(host, home, dry_run, report)
    return report

