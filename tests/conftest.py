"""Shared fixtures: an isolated home, and factories for throwaway plugins.

The kernel's tests never depend on what happens to be installed: every host they build has entry
points either off or pointed at distributions the test itself wrote.
"""

from __future__ import annotations

import itertools
import os
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_core import loader


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh $HERMES_CORE_HOME with no config, and no plugin-related environment."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HERMES_CORE_HOME", str(path))
    for var in ("HERMES_CORE_DISABLE_PLUGINS", "HERMES_CORE_STRICT_PLUGINS", "ANTHROPIC_API_KEY",
                "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    return path


@pytest.fixture
def dir_plugin(home: Path) -> Callable[[str, str], Path]:
    """Write ``$HERMES_CORE_HOME/plugins/<name>/__init__.py`` with the given source."""

    def make(name: str, source: str) -> Path:
        folder = home / "plugins" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text(textwrap.dedent(source), encoding="utf-8")
        return folder

    yield make
    for mod in [m for m in sys.modules if m.startswith(loader.DIRECTORY_PACKAGE)]:
        del sys.modules[mod]


@pytest.fixture
def fake_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., str]]:
    """Write a real distribution (dist-info with entry points) onto sys.path.

    importlib.metadata finds it exactly as it finds a pip-installed one, so discovery goes through
    the same code path; the subprocess install tests cover pip itself.
    """
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    loader.entry_points.cache_clear()
    modules: list[str] = []

    def make(dist: str, version: str, entry_points: dict[str, str], modules_src: dict[str, str]) -> str:
        for module, src in modules_src.items():
            (site / f"{module}.py").write_text(textwrap.dedent(src), encoding="utf-8")
            modules.append(module)
        info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8"
        )
        eps = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
        (info / "entry_points.txt").write_text(f"[hermes_core.plugins]\n{eps}\n", encoding="utf-8")
        loader.entry_points.cache_clear()
        return dist

    yield make
    loader.entry_points.cache_clear()
    for module in modules:
        sys.modules.pop(module, None)


# --------------------------------------------------------------------------- PostgreSQL

_pg_counter = itertools.count()


def _throwaway_pg_server() -> Iterator[Any]:
    """A real throwaway PostgreSQL server (see hermes_core.testing.postgres), stopped afterwards.

    Skips when no server binaries are installed, unless HERMES_CORE_TEST_PG_REQUIRED=1 (tox and
    CI set it), which makes a missing server a failure.
    """
    from hermes_core.testing.postgres import PG_REQUIRED_ENV, PostgresUnavailable, temp_postgres

    required = os.environ.get(PG_REQUIRED_ENV) == "1"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        if required:
            pytest.fail(f"{PG_REQUIRED_ENV}=1 but psycopg is not installed "
                        "(pip install 'psycopg[binary,pool]')")
        pytest.skip("psycopg is not installed: pip install 'psycopg[binary,pool]'")
    try:
        manager = temp_postgres()
        server = manager.__enter__()
    except PostgresUnavailable as exc:
        if required:
            pytest.fail(f"{PG_REQUIRED_ENV}=1 but no PostgreSQL server could be started: {exc}")
        pytest.skip(f"no PostgreSQL server: {exc}")
    try:
        yield server
    finally:
        manager.__exit__(None, None, None)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One throwaway PostgreSQL server for the whole run; each test gets a database (``pg_url``)."""
    yield from _throwaway_pg_server()


@pytest.fixture(scope="module")
def own_pg_server() -> Iterator[Any]:
    """A throwaway PostgreSQL server of one test module's own: for tests that halt and resume it."""
    yield from _throwaway_pg_server()


@pytest.fixture
def pg_url(pg_server: Any) -> Iterator[str]:
    """The URL of a fresh, empty database on the test server (dropped afterwards)."""
    name = f"t{os.getpid()}_{next(_pg_counter)}"
    url = pg_server.create_database(name)
    yield url
    from hermes_core.storage import close_pools

    close_pools()
    pg_server.drop_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def storage_url(request: pytest.FixtureRequest) -> str | None:
    """Each backend in turn: None (SQLite files in the home) or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return None
    return str(request.getfixturevalue("pg_url"))
