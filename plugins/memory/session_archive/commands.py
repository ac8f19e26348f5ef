"""``hermes-core sessions``: list, show, search, export and import the session archive.

A thin layer over :class:`hermes_core.plugins.memory.session_archive.SessionArchive` (the archive
at ``session_archive.path`` or ``$HERMES_CORE_HOME/state.db``). Read-only commands never create
the file; a corrupt file is reported (see ``hermes-core doctor``) and never modified.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hermes_core.commands import echo_json
from hermes_core.private import private_file

if TYPE_CHECKING:
    from . import SessionArchive

__all__ = ["sessions"]

PLUGIN = "session_archive"


def _path() -> tuple[Path, Any, str | None]:
    from hermes_core.config import load_config, validate_section
    from hermes_core.paths import home_dir

    from . import SessionArchiveConfig, archive_path

    config = load_config()
    settings = validate_section(config, PLUGIN, SessionArchiveConfig, plugin=PLUGIN)
    return archive_path(settings, home_dir()), settings, config.core.storage.url


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


@contextmanager
def _archive(*, create: bool = False) -> Iterator[SessionArchive | None]:
    """The archive, or None when it does not exist yet and ``create`` is off.

    Commands that only read (``create`` off) open the file read-only when it or its folder is not
    writable — a read-only home still lists and searches its sessions.

    With ``storage.url`` (or ``$HERMES_CORE_STORAGE_URL``) set, the PostgreSQL archive there."""
    from . import SessionArchive, open_archive

    path, settings, url = _path()
    if url is not None:
        archive = open_archive(settings, path.parent, url)
    elif not create and not path.exists():
        yield None
        return
    else:
        archive = SessionArchive(path, busy_timeout=settings.busy_timeout,
                                 synchronous=settings.synchronous, background_checkpoints=False,
                                 read_only=not create and not _writable(path),
                                 integrity_check=False)
        if archive.note:
            click.echo(click.style("note: ", fg="yellow") + archive.note, err=True)
    try:
        yield archive
    finally:
        archive.close()
        if url is not None:
            from hermes_core.storage import close_pools

            close_pools()


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M")


def _one_line(text: str | None, width: int) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@click.group()
def sessions() -> None:
    """The session archive (state.db): list, show, search, export, import, delete, reindex,
    review, facts."""


def _user_key(value: str | None) -> str | None:
    """A checked ``--user`` value (the rules of the webhook's ``user`` field), or None."""
    if value is None:
        return None
    from hermes_core.users import UserKeyError, check_user_key

    try:
        return check_user_key(value)
    except UserKeyError as exc:
        raise click.BadParameter(str(exc), param_hint="--user") from None


@sessions.command("list")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--all", "every", is_flag=True,
              help="List every session, not one line per compaction chain.")
@click.option("--user", metavar="KEY", help="That user key's sessions only (memory.scope: user).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_cmd(limit: int, every: bool, user: str | None, as_json: bool) -> None:
    """Sessions by last activity; a compaction chain shows as its newest session."""
    with _archive() as archive:
        records = [] if archive is None else archive.list_sessions(
            limit=limit, chains=not every, user=_user_key(user))
    if as_json:
        echo_json([r.to_dict() for r in records])
        return
    if not records and user is not None:
        click.echo(f"No sessions of user key {user!r} ('sessions list' without --user lists "
                   "every session).")
        return
    if not records:
        click.echo("No sessions yet.")
        return
    for r in records:
        chain = f" (+{r.chain_length - 1} compacted)" if r.chain_length > 1 and not every else ""
        click.echo(f"{r.id}  {_when(r.updated_at)}  {r.platform:<8} "
                   f"{r.chain_messages if not every else r.message_count:>5} msgs  "
                   f"{_one_line(r.title or r.preview or '', 60)}{chain}")


@sessions.command("facts")
@click.option("--user", metavar="KEY", help="That user key's facts (default: sessions without one).")
@click.option("--all-users", is_flag=True, help="Every user's facts.")
@click.option("--session", "session_id", metavar="ID", help="Facts read from that session only.")
@click.option("--current", is_flag=True, help="Only facts no newer fact superseded.")
@click.option("--state", is_flag=True,
              help="The derivation lane instead: turns waiting, last problem, model tokens.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def facts_cmd(user: str | None, all_users: bool, session_id: str | None, current: bool,
              state: bool, limit: int, as_json: bool) -> None:
    """Derived memory (session_archive.derive): the facts read from settled turns, newest first,
    each with its session, source messages and validity. Forget them with 'hermes-core forget'."""
    from .facts import derivation_state, list_facts

    with _archive() as archive:
        if state:
            found = None if archive is None else derivation_state(archive)
            if as_json:
                echo_json(found.to_dict() if found else None)
            else:
                click.echo("No archive yet." if found is None else "\n".join(
                    f"{k}: {v}" for k, v in found.to_dict().items()))
            return
        facts = [] if archive is None else list_facts(
            archive, user=_user_key(user), all_users=all_users, current_only=current,
            session_id=session_id, limit=limit)
    if as_json:
        echo_json([f.to_dict() for f in facts])
        return
    if not facts:
        click.echo("No derived facts (session_archive.derive is off, or nothing derived yet).")
        return
    for f in facts:
        d = f.to_dict()
        valid = f"since {d['valid_from']}" + ("" if f.current else
                                             f", superseded by {f.superseded_by}")
        click.echo(f"{f.id:>6}  {f.kind:<10} {_one_line(f.text, 70)}  ({valid}; session "
                   f"{f.session_id}, messages {', '.join(map(str, f.sources))})")


@sessions.command("show")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show_cmd(session_id: str, as_json: bool) -> None:
    """A session's details and messages."""
    with _archive() as archive:
        if archive is None:
            raise click.ClickException(f"no session {session_id!r}: the archive is empty")
        data = archive.show(session_id)
    if as_json:
        echo_json(data)
        return
    s = data["session"]
    click.echo(f"session {s['id']}  {s['title'] or '(untitled)'}")
    click.echo(f"  platform {s['platform']}  model {s['model'] or '-'}  started "
               f"{_when(s['started_at'])}  ended {_when(s['ended_at'])} "
               f"({s['end_reason'] or 'open'})")
    if s["parent_session_id"]:
        click.echo(f"  parent {s['parent_session_id']} ({s['origin']})")
    delegated = {d["id"] for d in data.get("delegations", [])}
    compacted = [c for c in data["children"] if c not in delegated]
    if compacted:
        click.echo(f"  children {', '.join(compacted)}")
    for d in data.get("delegations", []):
        click.echo(f"  delegated {d['id']}  {d['title'] or '(untitled)'}")
    click.echo(f"  tokens in {s['input_tokens']} out {s['output_tokens']} cache read "
               f"{s['cache_read_tokens']} write {s['cache_write_tokens']}  cost "
               f"${s['cost_usd']:.4f}")
    for m in data["messages"]:
        extra = f" [{m['tool_name']}]" if m.get("tool_name") else ""
        calls = "".join(f" -> {c.get('name')}({c.get('arguments')})"
                        for c in m.get("tool_calls", []))
        click.echo(f"\n#{m['id']} {m['role']}{extra}{_one_line(calls, 200)}")
        if m["content"]:
            click.echo(m["content"])


@sessions.command("search")
@click.argument("query")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 500))
@click.option("--user", metavar="KEY", help="That user key's sessions only (memory.scope: user).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def search_cmd(query: str, limit: int, user: str | None, as_json: bool) -> None:
    """Messages matching QUERY by words and meaning (the session_search tool's search), best
    first, with a message of context either side."""
    with _archive() as archive:
        hits, matched, semantic = ([], "all", None) if archive is None else _search(
            archive, query, limit, _user_key(user))
    if as_json:
        echo_json({"query": query, "matched": matched, "semantic": semantic or "on",
                   "hits": [h.to_dict() for h in hits]})
        return
    if semantic:
        click.echo(f"(by words only: {semantic})", err=True)
    if not hits:
        click.echo("No matching messages.")
        return
    if matched == "any":
        click.echo("(no message has every word; showing messages with any of them)")
    for h in hits:
        click.echo(f"{h.session_id}  #{h.message_id} {h.role}  {_when(h.timestamp)}  "
                   f"{_one_line(h.session_title, 40)}")
        click.echo(f"    {_one_line(h.snippet, 160)}")


def _search(archive: SessionArchive, query: str, limit: int,
            user: str | None) -> tuple[list[Any], str, str | None]:
    """(hits, how the words matched, why meaning took no part or None): the hybrid search of
    the ``session_search`` tool when the kernel's embedder can run, else words alone."""
    from hermes_core.commands import load_host
    from hermes_core.embeddings import select_embedder

    from . import search_messages
    from ._excerpts import hits_for
    from .search import DEFAULT_CANDIDATES, plan_query

    plan_query(archive, query)  # a query with nothing to search for is refused, as by words
    host = load_host(quiet=True)
    try:
        embedder, why = select_embedder(host.registries, host.config.core, host.home,
                                        host.config.plugin_sections)
    except Exception as exc:  # a broken embedder choice: words still work
        embedder, why = None, f"semantic search is off: {exc}"
    finally:
        host.shutdown()
    if embedder is None:
        result = search_messages(archive, query, limit=limit, user=user)
        return result.hits, result.matched, why
    try:
        from .hybrid import hybrid_candidates
        from .vector_index import VectorIndex

        fused = hybrid_candidates(archive, query, embedder, VectorIndex(archive),
                                  limit=DEFAULT_CANDIDATES, user=user)
        return hits_for(archive, fused.found[:limit], fused.plan), fused.matched, fused.problem
    finally:
        embedder.close()


@sessions.command("reindex")
@click.option("--rebuild", is_flag=True,
              help="Drop every stored vector and embed all messages again (after a model change).")
@click.option("--words", is_flag=True,
              help="Instead: keep the best messages of the commonest words again (a one-word "
                   "search then reads them instead of scoring every match; SQLite).")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def reindex_cmd(rebuild: bool, words: bool, as_json: bool) -> None:
    """Embed the archived messages that have no vector yet (semantic search), with progress.

    Uses the embedder embeddings.embedder selects. Vectors made by another model are dropped
    and rebuilt (they cannot be compared). Safe to interrupt: it resumes where it stopped.
    With --words, it rebuilds the word ranking's kept rows instead (no embedder needed).
    """
    if words:
        _reindex_words(as_json)
        return
    from hermes_core.commands import load_host
    from hermes_core.embeddings import EmbeddingError, select_embedder
    from hermes_core.kinds import EmbedderUnavailable

    host = load_host(quiet=True)
    try:
        embedder, why = select_embedder(host.registries, host.config.core, host.home,
                                        host.config.plugin_sections)
    except EmbedderUnavailable as exc:
        raise click.ClickException(str(exc)) from None
    if embedder is None:
        raise click.ClickException(f"nothing to do: {why}")
    try:
        from .vectors import pending, reindex, state
    except ImportError as exc:
        from hermes_core.embeddings import INSTALL_HINT

        raise click.ClickException(f"{exc.name} is missing: {INSTALL_HINT}") from None
    with _archive(create=True) as archive:
        assert archive is not None
        old = state(archive, embedder)
        total = pending(archive) if not (rebuild or old.problem) else archive.db.read(
            "SELECT count(*) FROM messages WHERE role IN ('user', 'assistant')")[0][0]
        with click.progressbar(length=max(total, 1), label=f"embedding with {embedder.name}",
                               file=sys.stderr) as bar:
            seen = [0]

            def progress(done: int, total: int) -> None:
                bar.length = max(total, 1)  # what reindex counts: grows with new messages
                bar.update(done - seen[0])
                seen[0] = done

            try:
                done = reindex(archive, embedder, progress=progress, rebuild=rebuild)
            except EmbeddingError as exc:
                raise click.ClickException(f"{exc} (the vectors made so far are kept; run "
                                           "the command again to resume)") from None
        after = state(archive, embedder)
    embedder.close()
    outcome = {"embedded": done, "vectors": after.count, "model": after.model,
               "rebuilt": bool(rebuild or old.problem)}
    if as_json:
        echo_json(outcome)
    else:
        click.echo(f"{done:,} messages embedded; {after.count:,} vectors with {after.model}.")


def _reindex_words(as_json: bool) -> None:
    from .impacts import UPTO, rebuild

    with _archive(create=True) as archive:
        assert archive is not None
        if archive.backend != "sqlite":
            raise click.ClickException("nothing to do: --words is for a SQLite archive "
                                       "(PostgreSQL ranks with its own index)")
        kept = rebuild(archive)
        upto = int(archive.db.read("SELECT value FROM meta WHERE key = ?", (UPTO,))[0][0])
    if as_json:
        echo_json({"words": kept, "covered_up_to": upto})
    else:
        click.echo(f"{kept:,} common words kept, for the messages up to id {upto:,}.")


@sessions.command("export")
@click.argument("session_ids", nargs=-1)
@click.option("--chain", is_flag=True, help="Include every session of each compaction chain.")
@click.option("--all", "every", is_flag=True,
              help="Every session of the archive, in the order they were created.")
@click.option("--user", metavar="KEY", help="With --all: that user key's sessions only.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True),
              help="Write to this file instead of standard output.")
def export_cmd(session_ids: tuple[str, ...], chain: bool, every: bool, user: str | None,
               output: str | None) -> None:
    """Write sessions as JSON Lines (one session line, then its messages).

    Name SESSION_IDS, or give --all (the whole archive, which 'sessions import' reads back into
    another home or another storage.url)."""
    from .transfer import export_session

    if every == bool(session_ids):
        raise click.UsageError("name the sessions to export, or give --all (not both)")
    if user is not None and not every:
        raise click.UsageError("--user goes with --all")
    with _archive() as archive:
        if archive is None:
            raise click.ClickException("the archive is empty: nothing to export")
        ids: list[str] = list(archive.session_ids(user=_user_key(user))) if every else []
        for sid in session_ids:
            for member in (archive.chain_of(sid) if chain else [sid]):
                if member not in ids:
                    ids.append(member)
        for sid in ids:
            archive.get_session(sid)  # a clear error before anything is written
        if output:
            tmp = f"{output}.part"
            try:
                # the export holds whole conversations: private (0600) like state.db
                private_file(Path(tmp))
                with open(tmp, "w", encoding="utf-8", errors="surrogatepass") as fh:
                    n = export_session(archive, ids, fh)
                os.replace(tmp, output)
            except OSError as exc:
                with suppress(OSError):  # under a file, unlink fails too (ENOTDIR)
                    Path(tmp).unlink(missing_ok=True)
                raise click.ClickException(
                    f"cannot write {output}: {exc.strerror or exc}; nothing was written. Give "
                    "-o a file in a folder you can write to") from None
            click.echo(f"wrote {n} lines ({len(ids)} session(s)) to {output}", err=True)
        else:
            export_session(archive, ids, sys.stdout)


@sessions.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, readable=True))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def import_cmd(file: str, as_json: bool) -> None:
    """Import a JSON Lines file written by 'sessions export'; existing sessions are skipped."""
    from .transfer import import_jsonl

    size = os.path.getsize(file)
    with _archive(create=True) as archive:
        assert archive is not None
        if size > 1_000_000 and not as_json:
            with click.progressbar(length=size, label="importing", file=sys.stderr) as bar:
                report = import_jsonl(archive, file, progress=bar.update)
        else:
            report = import_jsonl(archive, file)
    if as_json:
        echo_json(report.__dict__)
        return
    completed = (f" ({report.sessions_completed} of them got the messages they lacked)"
                 if report.sessions_completed else "")
    click.echo(f"imported {report.sessions_imported} session(s), {report.messages_imported} "
               f"message(s); skipped {report.sessions_skipped} already present{completed}")


@sessions.command("delete")
@click.argument("session_id")
@click.option("--chain", is_flag=True,
              help="Also delete the rest of its compaction chain (parents and children).")
@click.option("--json", "as_json", is_flag=True, help="Print what was deleted as JSON.")
def delete_cmd(session_id: str, chain: bool, as_json: bool) -> None:
    """Delete a session and its messages from the archive and its search index."""
    from .forget import delete_sessions

    with _archive() as archive:
        if archive is None:
            raise click.ClickException(f"there is no session archive at {_path()[0]}; nothing "
                                       "to delete")
        done = delete_sessions(archive, session_id, chain=chain)
    if done.sessions:
        from hermes_core.storage.erasures import tell_running_servers

        tell_running_servers("sessions delete")  # running servers drop the live conversation
    if as_json:
        echo_json({"sessions": done.sessions, "messages": done.messages})
        return
    click.echo(f"Deleted {len(done.sessions)} session(s) ({', '.join(done.sessions)}) and "
               f"{done.messages} message(s).")


@sessions.command("review")
@click.argument("session_id", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the review's report as JSON.")
def review(session_id: str | None, as_json: bool) -> None:
    """Run the memory review now over a stored session (default: the newest one).

    The auxiliary model (llm.auxiliary_model, else llm.model) reads the session's messages and
    may add, replace or remove entries of MEMORY.md / USER.md through the memory tool, with the
    same limits, threat scan and locking as in a chat.
    """
    from hermes_core.commands import load_host
    from hermes_core.types import Session

    host = load_host()
    try:
        # the review is another plugin's: reached through the plugin manager, not imported
        reviewer = host.pm.get_plugin("memory_review")
        if reviewer is None:
            raise click.ClickException(
                "the memory review is off in this home (plugins.disabled names memory_review, or "
                "plugins.enabled_only leaves it out), so nothing is reviewed; turn it back on to "
                "review a session")
        path, _settings, url = _path()
        # the archive the other commands read: with storage.url set, the PostgreSQL one
        with _archive() as archive:
            if archive is None:
                raise click.ClickException(f"there is no session archive at {path} yet: nothing "
                                           "to review")
            if session_id is None:
                newest = archive.list_sessions(limit=1)
                if not newest:
                    where = path if url is None else "the storage.url database"
                    raise click.ClickException(f"{where} holds no session yet: nothing to review")
                session_id = newest[0].id
            record = archive.get_session(session_id)  # a clear error for an unknown id
            messages = [m.to_message() for m in archive.messages(session_id)]
        if not any(m.role == "user" for m in messages):
            raise click.ClickException(f"session {session_id} has no user message to review")
        host.activate_memory_providers()
        session = Session(id=record.id, platform=record.platform, model=record.model,
                          title=record.title, attributes=dict(record.attributes))
        report = reviewer.review_session(host, session, messages)
    finally:
        host.shutdown()
    if as_json:
        echo_json({"session_id": report.session_id, "calls": report.calls,
                   "writes": report.writes, "error": report.error,
                   "timed_out": report.timed_out, "omitted_messages": report.omitted_messages,
                   "seconds": round(report.seconds, 3)})
    elif report.error:
        raise click.ClickException(f"the review model failed: {report.error}. Nothing was written.")
    elif report.writes:
        click.echo(report.notice)
    else:
        click.echo(f"memory review of {report.session_id}: nothing to save"
                   + (" (it ran out of time)" if report.timed_out else "") + ".")
    if as_json and report.error:
        raise SystemExit(1)
