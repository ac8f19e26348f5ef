"""The worker processes of bench/stress_storage.py: each writes to a store, forever or for
``--ops`` operations, and prints ``BEGIN ...`` before and ``ACK`` after each operation, so the
driver can tell what was acknowledged before it killed the process with SIGKILL.

    python bench/stress_workers.py --worker-kind memory --worker 0 --url URL --ops 100
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "plugins"))  # last: plugins/inspect must not shadow the stdlib inspect

OWNERS = ["", "alice", "bob"]
ENTRY = re.compile(r"^\[(w\d+-k\d+)\] v(\d+) [a-z]+$")


def say(*parts: object) -> None:
    sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
    sys.stdout.flush()


def memory_store(url: str | None, home: str | None, owner: str) -> Any:
    from memory.file_memory.store import MemoryStore

    from hermes_core.storage import parse_storage_url

    if url:
        from memory.file_memory.pg_store import PgMemoryStore

        return PgMemoryStore(parse_storage_url(url), owner=owner)
    directory = Path(home or ".") / "memories"
    if owner:
        directory = directory / "users" / owner
    return MemoryStore(directory)


def worker_memory(args: argparse.Namespace) -> None:
    """add / replace / remove entries with keys of this worker; BEGIN before, ACK after."""
    rng = random.Random(args.seed)
    stores = {o: memory_store(args.url, args.home, o) for o in OWNERS}
    live: dict[str, tuple[str, str, int]] = {}  # key -> (owner, target, version)
    n = args.start
    if args.start:  # taking over from a killed worker of this id: its entries as stored now
        for owner, store in stores.items():
            for target in ("memory", "user"):
                for entry in store.entries(target):
                    m = ENTRY.match(entry)
                    if m and m.group(1).startswith(f"w{args.worker}-"):
                        live[m.group(1)] = (owner, target, int(m.group(2)))
    for _ in range(args.ops):
        if len(live) < 3 or (rng.random() < 0.2 and len(live) < 5):
            key = f"w{args.worker}-k{n}"
            n += 1
            owner, target = rng.choice(OWNERS), rng.choice(["memory", "user"])
            text = f"[{key}] v0 {rng.choice(['alpha', 'beta', 'gamma', 'delta'])}"
            say("BEGIN add", repr(owner), target, key, 0)
            stores[owner].add(target, text)
            live[key] = (owner, target, 0)
            say("ACK")
        elif rng.random() < 0.6:
            key = rng.choice(sorted(live))
            owner, target, v = live[key]
            text = f"[{key}] v{v + 1} {rng.choice(['alpha', 'beta', 'gamma', 'delta'])}"
            say("BEGIN replace", repr(owner), target, key, v + 1)
            stores[owner].replace(target, f"[{key}] v", text)
            live[key] = (owner, target, v + 1)
            say("ACK")
        else:
            key = rng.choice(sorted(live))
            owner, target, v = live.pop(key)
            say("BEGIN remove", repr(owner), target, key, -1)
            stores[owner].remove(target, f"[{key}] v")
            say("ACK")


def worker_revert(args: argparse.Namespace) -> None:
    """Add entries to both documents, consolidate one, roll back to random versions, forever."""
    from memory.file_memory.versions import rollback

    rng = random.Random(args.seed)
    store = memory_store(args.url, args.home, "")
    n = 0
    while True:
        if rng.random() < 0.2:  # a consolidation, as the curator applies it (one document)
            target = rng.choice(["memory", "user"])
            state = store.read(target)
            entries = sorted(state.entries, reverse=rng.random() < 0.5)
            if len(entries) > 1 and entries != state.entries:
                say("BEGIN curate", target)
                store.overwrite(target, entries, expected=state.raw, action="curate")
                say("ACK")
        elif rng.random() < 0.5 or store.history is None:
            for target in ("memory", "user"):
                entries = store.entries(target)
                if len(entries) > 6:
                    store.remove(target, entries[0])
                store.add(target, f"[w{args.worker}-k{n}] v0 {target}")
                n += 1
        else:
            versions = store.history.read()
            if len(versions) > 2:
                pick = rng.choice(versions[-10:-1]).version
                say("BEGIN rollback", pick)
                rollback(store, pick)
                say("ACK")


def span_store(url: str | None, home: str | None) -> Any:
    if url:
        from context_engine.lossless.pg_store import PgSpanStore

        from hermes_core.storage import parse_storage_url

        return PgSpanStore(parse_storage_url(url))
    from context_engine.lossless.store import SpanStore

    return SpanStore(Path(home or ".") / "context.db")


def worker_lossless(args: argparse.Namespace) -> None:
    """Archive spans of 1-12 messages (what a compaction does), forever."""
    from hermes_core.types import Message

    store = span_store(args.url, args.home)
    rng = random.Random(args.seed)
    for i in range(10**9):
        n = rng.randint(1, 12)
        conv = f"conv-{args.worker}-{i % 3}"
        say("BEGIN", conv, f"w{args.worker}s{i}", n)
        span = store.add_span(conv, [Message(role="user", content=f"w{args.worker}s{i} m{k}")
                                     for k in range(n)], f"digest w{args.worker}s{i}")
        say("ACK", span.id)


def worker_archive(args: argparse.Namespace) -> None:
    """Append messages to this worker's own sessions and to the shared ones."""
    from hermes_core.types import Message, Session, Usage

    rng = random.Random(args.seed)
    archive = archive_at(args.url, args.home)
    for i in range(args.ops):
        own = rng.random() < 0.7
        sid = f"own-{args.worker}-{i % 5}" if own else f"shared-{i % 3}"
        tokens = rng.randint(1, 9)
        usage = Usage(input_tokens=tokens, output_tokens=1) if rng.random() < 0.5 else None
        content = f"w{args.worker} n{i} t{tokens if usage else 0}"
        say("BEGIN", sid, content)
        archive.append_message(Session(id=sid, platform="bench"),
                               Message(role="user", content=content), usage=usage)
        say("ACK")


class HashEmbedder:
    """The fake model: a deterministic vector per text (its SHA-256 spread over 8 axes), so a
    stored vector says exactly which text it was made from. ``delay``: seconds per call."""

    name = "hash"
    model_id = "hash-v1"
    dimension = 8

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def embed(self, texts: Any) -> list[list[float]]:
        import hashlib

        if self.delay:
            time.sleep(self.delay)
        out = []
        for text in texts:
            digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
            v = [b - 127.5 for b in digest[:8]]
            norm = sum(x * x for x in v) ** 0.5
            out.append([x / norm for x in v])
        return out


def guarded(delay: float = 0.0) -> Any:
    from hermes_core.embeddings import GuardedEmbedder

    return GuardedEmbedder(HashEmbedder(delay), timeout=60)  # type: ignore[arg-type]


def archive_at(url: str | None, home: str | None) -> Any:
    from memory.session_archive.store import PgSessionArchive, SessionArchive

    from hermes_core.storage import parse_storage_url

    if url:
        return PgSessionArchive(parse_storage_url(url))
    return SessionArchive(Path(home or ".") / "state.db")


def worker_indexer(args: argparse.Namespace) -> None:
    """Append messages and embed them (a slow fake model), forever: killed from outside."""
    from memory.session_archive.vectors import index_batch

    from hermes_core.types import Message

    archive = archive_at(args.url, args.home)
    embedder = guarded(0.004)
    rng = random.Random(args.seed)
    i = 0
    while True:
        for _ in range(rng.randint(1, 20)):
            archive.append_message(f"idx-{args.worker}", Message(
                role="user", content=f"w{args.worker} message {i} {rng.random()}"))
            i += 1
        say("BEGIN batch")
        index_batch(archive, embedder, 16)


def worker_appender(args: argparse.Namespace) -> None:
    """A node serving turns: append to 20 sessions in turn, a new session now and then."""
    from hermes_core.types import Message

    archive = archive_at(args.url, args.home)
    for i in range(10**9):
        sid = f"node-{i % 20}" if i % 50 else f"new-{i}"
        say("BEGIN", sid, f"message {i}")
        archive.append_message(sid, Message(role="user", content=f"message {i}"))
        say("ACK")


WORKERS = {"memory": worker_memory, "archive": worker_archive, "indexer": worker_indexer,
           "appender": worker_appender, "lossless": worker_lossless, "revert": worker_revert}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker-kind", required=True, choices=sorted(WORKERS))
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--url")
    parser.add_argument("--home")
    parser.add_argument("--ops", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0)
    args = parser.parse_args()
    WORKERS[args.worker_kind](args)


if __name__ == "__main__":
    main()
