"""The replay guard shared by every node of one ``storage.url`` database.

With the SQLite files in the home, each ``serve`` process is the whole service and the in-memory
:class:`~.signing.ReplayGuard` is enough. With ``storage.url``, several nodes serve one service:
a request captured on its way to node A and sent again to node B (or to A after a restart) is a
replay all the same. :class:`SharedReplayGuard` therefore records each accepted MAC in the
database too, in the ``webhook_replays`` table: ``INSERT ... ON CONFLICT DO NOTHING`` on the MAC
(its primary key) tells, atomically across nodes, whether the request was already served.

* The in-memory guard still comes first: a replay sent to the same node costs no round trip.
* Rows older than twice the skew window are deleted now and then (the timestamp check refuses
  such requests anyway), so the table stays as small as one window's traffic.
* When the database does not answer, the request is refused with 503 (retry later) and its MAC
  forgotten, so the sender's retry of the same signed request is served once the database is
  back. A request is never served without its MAC recorded.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from hermes_core.errors import HermesCoreError
from hermes_core.storage import StorageURL, redact_url
from hermes_core.storage.component import open_component, run_on
from hermes_core.storage.errors import StorageError
from hermes_core.storage.pool import import_psycopg

from .deliveries import PG_MIGRATION
from .signing import ReplayGuard, SignatureError

__all__ = ["COMPONENT", "MIGRATIONS", "ReplayStoreUnavailable", "SharedReplayGuard"]

COMPONENT = "webhook"
MIGRATIONS: list[Any] = [
    (1, "webhook_replays: the MACs of the signed requests served, for the replay guard", [
        """CREATE TABLE webhook_replays (
            mac BYTEA PRIMARY KEY,
            seen_at DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX webhook_replays_seen_at ON webhook_replays (seen_at)",
    ]),
    PG_MIGRATION,  # webhook_deliveries (see .deliveries)
]


class ReplayStoreUnavailable(HermesCoreError):
    """The shared replay guard could not be asked; the request was not served (503)."""


class SharedReplayGuard(ReplayGuard):
    """:class:`ReplayGuard` whose memory is the ``storage.url`` database (see the module)."""

    def __init__(self, url: StorageURL, window: float) -> None:
        super().__init__(window)
        self.url = url
        self._psycopg = import_psycopg()
        self._pool: Any = None
        self._pool_lock = threading.Lock()
        self._pruned_at = 0.0

    def _pool_now(self) -> Any:
        with self._pool_lock:
            if self._pool is None:
                self._pool = open_component(self.url, COMPONENT, MIGRATIONS)
            return self._pool

    def open(self) -> None:
        """Create or check the table now (at start: a database problem stops ``serve`` early)."""
        self._pool_now()

    def check(self, key: bytes | str, now: float | None = None) -> None:
        now = time.time() if now is None else now
        super().check(key, now)  # this node saw it: a replay, no round trip
        mac = key if isinstance(key, bytes) else key.encode("utf-8")
        prune = now - self._pruned_at > self.window
        if prune:
            self._pruned_at = now

        def run(con: Any) -> bool:
            # one statement, one round trip (the pool's connections autocommit); the prune is
            # housekeeping beside it, now and then
            if prune:
                con.execute("DELETE FROM webhook_replays WHERE seen_at < %s",
                            (now - 2 * self.window,))
            cur = con.execute("INSERT INTO webhook_replays (mac, seen_at) VALUES (%s, %s) "
                              "ON CONFLICT (mac) DO NOTHING", (mac, now))
            return bool(cur.rowcount == 1)

        try:
            fresh = run_on(self._pool_now(), run, retry=False)
        except (self._psycopg.Error, StorageError) as exc:
            self.forget(key)  # not served: the sender's retry must get through
            reason = redact_url(str(exc).strip().splitlines()[0]) if str(exc).strip() else (
                type(exc).__name__)
            raise ReplayStoreUnavailable(
                f"the replay guard's database ({self.url.redacted}) did not answer: {reason}; "
                "the request was not served, retry it later") from None
        if not fresh:
            raise SignatureError("this signed request was already received (by this or another "
                                 "node of the service); a request is served once (sign a retry "
                                 "anew, with a new timestamp)")
