"""A throwaway PostgreSQL server for tests and benchmarks: a real server, never a mock.

:class:`TempPostgres` runs ``initdb`` in a fresh temporary folder, starts ``postgres`` on
127.0.0.1 on a free port (its unix socket inside that folder), waits until it accepts
connections (a bounded loop on a real connection attempt, no fixed sleep), and stops it by PID.
PostgreSQL refuses to run as root: when the caller is root, the server runs as an unprivileged
system user (``postgres`` when it exists, otherwise ``hermes-pg``, created with ``useradd``).

The server binaries are looked up in ``$HERMES_CORE_PG_BIN`` when it is set (and only there: point
it at an empty folder to run as a machine without a server would), otherwise on ``PATH``, then in
Debian's ``/usr/lib/postgresql/<version>/bin``. :func:`find_binaries` returns None when there are none;
``HERMES_CORE_TEST_PG_REQUIRED=1`` turns that into a failure in the pytest fixture (CI sets it,
so a missing server can never pass as a skip).

Command line (for trying the PostgreSQL backend by hand)::

    python -m hermes_core.testing.postgres    # prints the URL; Ctrl-C or SIGTERM stops it
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PG_REQUIRED_ENV",
    "PostgresUnavailable",
    "TempPostgres",
    "find_binaries",
    "temp_postgres",
]

#: when "1", a missing PostgreSQL server fails the tests that need one instead of skipping them
PG_REQUIRED_ENV = "HERMES_CORE_TEST_PG_REQUIRED"
_RUN_AS_CANDIDATES = ("postgres", "hermes-pg")
_START_TIMEOUT = 60.0
_STOP_TIMEOUT = 30.0


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries, or the server could not be started."""


def find_binaries() -> Path | None:
    """The folder holding ``initdb``, ``postgres`` and ``pg_ctl``, or None."""
    candidates: list[str] = []
    if os.environ.get("HERMES_CORE_PG_BIN"):
        candidates.append(os.environ["HERMES_CORE_PG_BIN"])
        return _first_with_binaries(candidates)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    # Debian keeps the server binaries out of PATH; prefer the newest version.
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                    key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
                    reverse=True)
    candidates += debian
    return _first_with_binaries(candidates)


def _first_with_binaries(candidates: list[str]) -> Path | None:
    for folder in candidates:
        path = Path(folder)
        if all((path / name).is_file() for name in ("initdb", "postgres", "pg_ctl")):
            return path
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as_user() -> pwd.struct_passwd | None:
    """The unprivileged account to run the server as when we are root (created if needed)."""
    if os.geteuid() != 0:
        return None
    for name in _RUN_AS_CANDIDATES:
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    useradd = shutil.which("useradd")
    if useradd is None:
        raise PostgresUnavailable("running as root and there is no unprivileged user for "
                                  "PostgreSQL (no 'postgres' account and no useradd to create "
                                  "'hermes-pg'); run the tests as a normal user")
    subprocess.run([useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    "hermes-pg"], check=True, capture_output=True)
    return pwd.getpwnam("hermes-pg")


@dataclass
class TempPostgres:
    """One running throwaway server; use :func:`temp_postgres` or ``start()``/``stop()``."""

    bindir: Path
    root: Path
    port: int
    user: str = "hermes"
    password: str = "hermes-test"
    database: str = "hermes"
    pid: int | None = None
    #: server settings (``-c name=value``) over the test defaults, e.g. ``{"fsync": "on"}``
    settings: dict[str, str] | None = None
    _proc: subprocess.Popen[bytes] | None = None
    _owner: pwd.struct_passwd | None = None

    @property
    def url(self) -> str:
        """The URL to the test database (TCP on 127.0.0.1, password authentication)."""
        return (f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/"
                f"{self.database}")

    def url_for(self, database: str) -> str:
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{database}"

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    def _cmd(self, args: list[str]) -> list[str]:
        if self._owner is None:
            return args
        setpriv = shutil.which("setpriv")
        if setpriv:
            return [setpriv, f"--reuid={self._owner.pw_uid}", f"--regid={self._owner.pw_gid}",
                    "--clear-groups", "--", *args]
        runuser = shutil.which("runuser")
        if runuser:
            return [runuser, "-u", self._owner.pw_name, "--", *args]
        raise PostgresUnavailable("running as root without setpriv or runuser to drop privileges")

    def start(self) -> TempPostgres:
        self._owner = _run_as_user()
        if self._owner is not None:
            os.chown(self.root, self._owner.pw_uid, self._owner.pw_gid)
        os.chmod(self.root, 0o700)
        pwfile = self.root / "pw"
        pwfile.write_text(self.password, encoding="utf-8")
        if self._owner is not None:
            os.chown(pwfile, self._owner.pw_uid, self._owner.pw_gid)
        env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
        init = subprocess.run(
            self._cmd([str(self.bindir / "initdb"), "-D", str(self.datadir), "-U", self.user,
                       "--pwfile", str(pwfile), "--auth=scram-sha-256", "--encoding=UTF8",
                       "--locale=C.UTF-8", "--no-sync"]),
            capture_output=True, text=True, env=env, cwd=self.root,
        )
        pwfile.unlink()
        if init.returncode != 0:
            raise PostgresUnavailable(f"initdb failed ({init.returncode}): {init.stderr.strip()}")
        self._launch()
        self._create_database()
        return self

    def _launch(self) -> None:
        env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
        log = open(self.root / "server.log", "ab")  # noqa: SIM115 - kept open for the server
        # tests want speed, not durability; a benchmark passes the settings it measures with
        settings = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
                    "max_connections": "200", "shared_buffers": "128MB", **(self.settings or {})}
        options = [arg for name, value in settings.items() for arg in ("-c", f"{name}={value}")]
        self._proc = subprocess.Popen(
            self._cmd([str(self.bindir / "postgres"), "-D", str(self.datadir),
                       "-h", "127.0.0.1", "-p", str(self.port), "-k", str(self.root),
                       *options]),
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.root,
            start_new_session=True,
        )
        log.close()
        self.pid = self._proc.pid
        self._wait_ready()

    def halt(self) -> None:
        """Stop the server (a fast shutdown, by PID) and keep its data, for :meth:`resume`: the
        database going away under a running hermes-core."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=_STOP_TIMEOUT)

    def resume(self) -> None:
        """Start the server again on the same data folder and port, after :meth:`halt`."""
        if self._proc is not None:
            raise PostgresUnavailable("the server is still running; halt() it first")
        self._launch()

    def _log_tail(self) -> str:
        try:
            return (self.root / "server.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + _START_TIMEOUT
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise PostgresUnavailable(
                    f"postgres exited with {self._proc.returncode}: {self._log_tail()}")
            try:
                with psycopg.connect(self.url_for("postgres"), connect_timeout=2):
                    return
            except psycopg.OperationalError as exc:
                last = exc
                # poll again shortly; returns at once if the server process exits meanwhile
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(timeout=0.05)
        self.stop()
        raise PostgresUnavailable(f"postgres did not accept connections within "
                                  f"{_START_TIMEOUT:.0f}s ({last}): {self._log_tail()}")

    def _create_database(self) -> None:
        self.create_database(self.database)

    def create_database(self, name: str) -> str:
        """Create an empty database on this server; return its URL."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url_for("postgres"), autocommit=True) as con:
            con.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url_for("postgres"), autocommit=True) as con:
            con.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))

    def stop(self) -> None:
        """Stop the server by its PID (fast shutdown, then kill after a bound) and delete it."""
        self.halt()
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def temp_postgres(settings: dict[str, str] | None = None) -> Iterator[TempPostgres]:
    """A running throwaway server, stopped and deleted on exit; ``settings`` override the test
    defaults (which trade durability for speed: ``fsync=off``)."""
    bindir = find_binaries()
    if bindir is None:
        raise PostgresUnavailable(
            "no PostgreSQL server binaries (initdb, postgres, pg_ctl) found: install the "
            "'postgresql' package (apt-get install postgresql) or set HERMES_CORE_PG_BIN")
    # Not under pytest's private tmp folders: the server's user must be able to enter it.
    root = Path(tempfile.mkdtemp(prefix="hermes-pg-"))
    server = TempPostgres(bindir=bindir, root=root, port=_free_port(), settings=settings)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    try:
        yield server
    finally:
        server.stop()


def main() -> None:  # pragma: no cover - manual use
    import threading

    stop = threading.Event()
    # SIGTERM and SIGINT both stop and delete the server (a background job ignores SIGINT)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with temp_postgres() as server:
        print(server.url, flush=True)
        while not stop.wait(1.0):
            pass


if __name__ == "__main__":  # pragma: no cover
    main()
