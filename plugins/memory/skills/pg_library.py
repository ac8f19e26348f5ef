"""The skill library in the ``storage.url`` database: one row per skill, the same rules as files.

:class:`PgSkillLibrary` is :class:`~.library.SkillLibrary` with each ``<name>.md`` kept as a row of
``skills`` (name, the file's exact bytes, a version that grows on every write); only the medium
differs, over the storage dialect. Concurrency across threads, processes and nodes:

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

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from hermes_core.storage import StorageURL
from hermes_core.storage.dialect import PgDatabase
from hermes_core.storage.migrations import PgMigration

from .library import Row, SkillError, SkillLibrary

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
        # no folder: ``directory`` is a name that exists nowhere; messages use ``location``
        super().__init__(Path("(database)"), max_chars=max_chars)
        self.url = url
        self.db = PgDatabase(url, COMPONENT, MIGRATIONS, error=SkillError,
                             what="the skills table")

    @property
    def location(self) -> str:
        return f"the skills table of {self.url.redacted}"

    def _where(self, name: str) -> Path:
        """``<name>.md``: the row stands for that file."""
        return Path(f"{name}.md")

    def _rows(self, name: str | None) -> list[Row]:
        # the bytes are part of the key: a skill deleted and created again restarts at version 1
        rows = (self.db.fetch("SELECT name, version, body FROM skills WHERE name = ?", (name,))
                if name is not None else
                self.db.fetch("SELECT name, version, body FROM skills ORDER BY name"))
        return [(str(n), (int(v), bytes(b)), _constant(bytes(b))) for n, v, b in rows]

    def _insert(self, name: str, data: bytes, *, note: str = "") -> bool:
        return self.db.execute("INSERT INTO skills(name, body) VALUES (?, ?) "
                               "ON CONFLICT (name) DO NOTHING", (name, data)) > 0

    @contextlib.contextmanager
    def _edit(self, name: str) -> Iterator[tuple[Row | None, Callable[[bytes], None]]]:
        with self.db.transaction() as con:
            rows = self.db.rows(con, "SELECT version, body FROM skills WHERE name = ? FOR UPDATE",
                                (name,))

            def save(data: bytes) -> None:
                con.execute(self.db.sql("UPDATE skills SET body = ?, version = version + 1, "
                                        "updated_at = extract(epoch FROM now()) WHERE name = ?"),
                            (data, name))

            yield ((name, None, _constant(bytes(rows[0][1]))) if rows else None), save

    def forget_matching(self, matches: Callable[[str], bool], *, dry_run: bool) -> list[str]:
        with self.db.transaction(lock=forget_lock_id) as con:
            rows = self.db.rows(con, "SELECT name, body FROM skills ORDER BY name")
            found = [str(n) for n, b in rows if matches(bytes(b).decode("utf-8", errors="replace"))]
            if found and not dry_run:
                where, params = self.db.any_of("name", found)
                con.execute(self.db.sql(f"DELETE FROM skills WHERE {where}"), params)
        return found


def _constant(data: bytes) -> Callable[[], bytes]:
    return lambda: data
