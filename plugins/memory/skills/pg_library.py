"""The skill library in the ``storage.url`` database: one row per skill, the same rules as files.

:class:`PgSkillLibrary` is :class:`~.library.SkillLibrary` with each ``<name>.md`` kept as a row of
``skills`` (name, the file's exact bytes, a version that grows on every write). Parsing, the
name and size limits and the threat scan are the file library's own code; only the medium
changes. Concurrency across threads, processes and nodes:

* ``create`` inserts with ``ON CONFLICT DO NOTHING``: of two nodes creating one name, one wins and
  the other is told the name exists;
* ``patch`` reads the row ``FOR UPDATE`` and writes it back in the same transaction, so two
  patches never lose one another;
* ``forget`` deletes the matching rows in one transaction, under the library's advisory lock
  (all of them or none).

The body is stored as bytes (``bytea``), so a skill moved from a home with ``storage migrate``
keeps exactly what its file held, an undecodable one included (it is listed as unusable, as it
was in the folder).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hermes_core.storage import StorageURL
from hermes_core.storage.component import open_component, run_on
from hermes_core.storage.migrations import PgMigration
from hermes_core.storage.pool import connect_error, import_psycopg

from .library import Skill, SkillError, SkillLibrary, _check_name, parse_skill

__all__ = ["COMPONENT", "MIGRATIONS", "PgSkillLibrary", "forget_lock_id"]

COMPONENT = "skills"
MIGRATIONS: list[PgMigration] = [
    (1, "skills: one row per skill, the file's bytes", [
        """CREATE TABLE skills (
            name TEXT PRIMARY KEY,
            body BYTEA NOT NULL,
            version BIGINT NOT NULL DEFAULT 1,
            updated_at DOUBLE PRECISION NOT NULL DEFAULT extract(epoch FROM now())
        )""",
    ]),
]
#: the advisory lock serialising whole-library changes (forget) across nodes ("HCSK")
forget_lock_id = 0x4843534B


class PgSkillLibrary(SkillLibrary):
    """The skills of one database (shared by every user and node)."""

    def __init__(self, url: StorageURL, *, max_chars: int = 20_000) -> None:
        self.url = url
        self.max_chars = max_chars
        # no folder: ``directory`` is a name that exists nowhere; messages use ``location``
        self.directory = Path("(database)")
        self._cache: dict[Path, tuple[int, int, Skill]] = {}
        #: name -> (version, bytes, parsed): prompt assembly re-parses only changed skills
        self._pg_cache: dict[str, tuple[int, bytes, Skill]] = {}
        self._cache_lock = threading.Lock()
        self._psycopg = import_psycopg()
        self._pool: Any = open_component(url, COMPONENT, MIGRATIONS)

    @property
    def location(self) -> str:
        return f"the skills table of {self.url.redacted}"

    def path(self, name: str) -> Path:
        """A name for messages and listings: ``<name>.md`` (the row stands for that file)."""
        return Path(f"{_check_name(name)}.md")

    def _run(self, fn: Callable[[Any], Any], *, retry: bool = False) -> Any:
        """``fn(connection)``; ``retry``: safe to run again after a dropped connection."""
        psycopg = self._psycopg
        try:
            return run_on(self._pool, fn, retry=retry)
        except SkillError:
            raise
        except psycopg.OperationalError as exc:
            raise SkillError(str(connect_error(self.url, exc))) from None
        except psycopg.Error as exc:
            raise SkillError(f"the skills table in {self.url.redacted} refused the request: "
                             f"{exc}; nothing was changed") from None

    # ------------------------------------------------------------------------------- reading

    def _parse(self, name: str, version: int, data: bytes) -> Skill:
        path = Path(f"{name}.md")
        with self._cache_lock:
            cached = self._pg_cache.get(name)
        # the bytes are compared too: a skill deleted and created again restarts at version 1
        if cached is not None and cached[0] == version and cached[1] == data:
            return cached[2]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            skill = Skill(name, path, error=f"cannot read {path.name}: {exc}")
        else:
            skill = parse_skill(text, path)
            if skill.error is None and len(text) > self.max_chars:
                skill.error = (f"{path.name} has {len(text)} characters, over the limit of "
                               f"{self.max_chars} (skills.max_chars); shorten it")
        with self._cache_lock:
            self._pg_cache[name] = (version, data, skill)
        return skill

    def load(self, path: Path) -> Skill:
        name = path.stem
        row = self._run(lambda con: con.execute(
            "SELECT version, body FROM skills WHERE name = %s", (name,)).fetchone(), retry=True)
        if row is None:
            return Skill(name, path, error=f"cannot read {path.name}: no such skill")
        return self._parse(name, int(row[0]), bytes(row[1]))

    def all(self) -> list[Skill]:
        rows = self._run(lambda con: con.execute(
            "SELECT name, version, body FROM skills ORDER BY name").fetchall(), retry=True)
        return [self._parse(str(n), int(v), bytes(b)) for n, v, b in rows]

    def get(self, name: str) -> Skill:
        name = _check_name(name)
        row = self._run(lambda con: con.execute(
            "SELECT version, body FROM skills WHERE name = %s", (name,)).fetchone(), retry=True)
        if row is None:
            known = ", ".join(s.name for s in self.all() if s.error is None) or "none"
            raise SkillError(f"there is no skill named {name!r}. Known skills: {known}")
        skill = self._parse(name, int(row[0]), bytes(row[1]))
        if skill.error is not None:
            raise SkillError(f"skill {name!r} cannot be used: {skill.error}")
        return skill

    def raw(self) -> Iterator[tuple[str, bytes]]:
        """(name, exact bytes) of every skill, by name (``storage migrate``, exports)."""
        rows = self._run(lambda con: con.execute(
            "SELECT name, body FROM skills ORDER BY name").fetchall(), retry=True)
        for name, body in rows:
            yield str(name), bytes(body)

    # ------------------------------------------------------------------------------ writing

    def create(self, name: str, description: str, body: str) -> Skill:
        text = self._checked_new(name, description, body)
        name = _check_name(name)
        if not self.put_raw(name, text.encode("utf-8")):
            raise SkillError(f"a skill named {name!r} already exists; use action 'patch' to "
                             "change it, or pick another name")
        return self.get(name)

    def put_raw(self, name: str, data: bytes) -> bool:
        """Store ``data`` as skill ``name`` unless the name is taken; True when stored.

        No check beyond the name: what arrives here is a file's exact bytes (``storage
        migrate``), listed as unusable when it breaks a rule, exactly as in the folder."""
        name = _check_name(name)
        cur = self._run(lambda con: con.execute(
            "INSERT INTO skills(name, body) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING",
            (name, data)))
        return bool(cur.rowcount)

    def patch(self, name: str, old_text: str, new_text: str) -> Skill:
        if not old_text:
            raise SkillError("'old_text' is required: a part of the skill, quoted exactly, that "
                             "occurs once")
        name = _check_name(name)

        def run(con: Any) -> None:
            with con.transaction():
                row = con.execute("SELECT version, body FROM skills WHERE name = %s FOR UPDATE",
                                  (name,)).fetchone()
                if row is None:
                    self.get(name)  # raises, naming the known skills
                skill = self._parse(name, int(row[0]), bytes(row[1]))
                if skill.error is not None:
                    raise SkillError(f"skill {name!r} cannot be used: {skill.error}")
                text = bytes(row[1]).decode("utf-8")
                new = self._patched(name, text, old_text, new_text)
                con.execute("UPDATE skills SET body = %s, version = version + 1, "
                            "updated_at = extract(epoch FROM now()) WHERE name = %s",
                            (new.encode("utf-8"), name))

        self._run(run)
        return self.get(name)

    def forget_matching(self, matches: Callable[[str], bool], *, dry_run: bool) -> list[Path]:
        """Delete every skill whose text ``matches``, all or none; the ``<name>.md`` of each."""

        def run(con: Any) -> list[Path]:
            with con.transaction():
                con.execute("SELECT pg_advisory_xact_lock(%s)", (forget_lock_id,))
                rows = con.execute("SELECT name, body FROM skills ORDER BY name").fetchall()
                found = [str(n) for n, b in rows
                         if matches(bytes(b).decode("utf-8", errors="replace"))]
                if found and not dry_run:
                    con.execute("DELETE FROM skills WHERE name = ANY(%s)", (found,))
                return [Path(f"{n}.md") for n in found]

        return self._run(run)  # type: ignore[no-any-return]
