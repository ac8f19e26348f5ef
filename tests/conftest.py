"""Shared fixtures: an isolated home, and factories for throwaway plugins.

The kernel's tests never depend on what happens to be installed: every host they build has entry
points either off or pointed at distributions the test itself wrote.
"""

from __future__ import annotations

import itertools
import os
import shutil
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
def run(home: Path) -> Callable[..., Any]:
    """``run("config", "get", "x")``: the ``hermes-core`` command in ``home``, through click's
    runner (exceptions not caught: a traceback fails the test)."""
    from click.testing import CliRunner

    from hermes_core.cli import cli

    runner = CliRunner()

    def invoke(*args: str, **kwargs: Any) -> Any:
        return runner.invoke(cli, list(args), catch_exceptions=False, **kwargs)

    return invoke


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


# --------------------------------------------------------------------------- PostgreSQL, tmux

_pg_counter = itertools.count()

#: fixtures that start a PostgreSQL server; a test parametrized with "postgresql" needs one too
_PG_FIXTURES = frozenset({"pg_server", "own_pg_server", "pg_url"})
#: "0" lets the tests that need tmux skip when it is missing (by default they are required)
TMUX_REQUIRED_ENV = "HERMES_CORE_TEST_TMUX_REQUIRED"


@pytest.fixture
def tmux_socket() -> Iterator[str]:
    """A private tmux server's socket name (tests/tmux_support.py); the server is killed after."""
    import subprocess
    import uuid

    socket = f"hermes-core-test-{uuid.uuid4().hex[:8]}"
    yield socket
    subprocess.run([shutil.which("tmux") or "tmux", "-L", socket, "kill-server"],
                   capture_output=True, timeout=10)


def _required(env: str) -> bool:
    """Tests that need an outside program are required unless ``env`` is "0": a missing server
    fails them, so a run without one can never pass as green by skipping."""
    return os.environ.get(env, "1").strip() != "0"


def _needs_postgres(item: pytest.Item) -> bool:
    if _PG_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "postgresql" in callspec.params.values()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs_postgres: starts a throwaway PostgreSQL server "
                            "(set automatically from the fixtures and parameters it uses)")
    config.addinivalue_line("markers", "needs_tmux: drives a real terminal through tmux")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that need a PostgreSQL server (so ``-m "not needs_postgres"`` works)."""
    for item in items:
        if _needs_postgres(item):
            item.add_marker(pytest.mark.needs_postgres)


def missing_programs(items: list[pytest.Item]) -> list[tuple[str, str, int, str]]:
    """(program, what to install, how many selected tests need it, the env var that allows
    skipping them) for each outside program the selected tests need and this machine lacks."""
    from hermes_core.testing.postgres import PG_REQUIRED_ENV, find_binaries

    missing = []
    pg = sum(1 for i in items if i.get_closest_marker("needs_postgres"))
    if pg and find_binaries() is None:
        missing.append((
            "PostgreSQL server binaries (initdb, postgres, pg_ctl)",
            "Debian/Ubuntu: apt-get install postgresql; macOS: brew install postgresql; or point "
            "HERMES_CORE_PG_BIN at the folder that holds them", pg, PG_REQUIRED_ENV))
    tmux = sum(1 for i in items if i.get_closest_marker("needs_tmux"))
    if tmux and shutil.which("tmux") is None:
        missing.append(("tmux", "apt-get install tmux / brew install tmux", tmux,
                        TMUX_REQUIRED_ENV))
    return missing


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Say once, before any test runs, which outside programs are missing: stop the run when a
    needed one is required (the default, and what tox and CI use), otherwise skip its tests."""
    missing = missing_programs(session.items)
    stop = [m for m in missing if _required(m[3])]
    if stop:
        lines = [f"{count} selected tests need {what}, which this machine lacks ({how}). "
                 f"To skip those tests instead, set {env}=0 (tox and CI keep them required)."
                 for what, how, count, env in stop]
        raise pytest.UsageError("\n".join(lines))
    for what, _how, _count, env in missing:
        marker = "needs_postgres" if env != TMUX_REQUIRED_ENV else "needs_tmux"
        reason = f"{what} not installed ({env}=0 allows skipping)"
        for item in session.items:
            if item.get_closest_marker(marker):
                item.add_marker(pytest.mark.skip(reason=reason))


def _throwaway_pg_server() -> Iterator[Any]:
    """A real throwaway PostgreSQL server (see hermes_core.testing.postgres), stopped afterwards.

    A server that cannot start fails the test, unless HERMES_CORE_TEST_PG_REQUIRED=0 allows
    skipping it.
    """
    from hermes_core.testing.postgres import PG_REQUIRED_ENV, PostgresUnavailable, temp_postgres

    required = _required(PG_REQUIRED_ENV)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        if required:
            pytest.fail(f"psycopg is not installed (pip install 'psycopg[binary,pool]'); "
                        f"{PG_REQUIRED_ENV}=0 skips the tests that need it")
        pytest.skip("psycopg is not installed: pip install 'psycopg[binary,pool]'")
    try:
        manager = temp_postgres()
        server = manager.__enter__()
    except PostgresUnavailable as exc:
        if required:
            pytest.fail(f"no PostgreSQL server could be started: {exc} "
                        f"({PG_REQUIRED_ENV}=0 skips the tests that need one)")
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
