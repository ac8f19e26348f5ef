"""Every hook of hermes-core, in one place.

There are two families:

* **Registry hooks** (``register_*``) are implemented by plugin *modules*. The kernel calls each of
  them once per plugin manager, handing a ``register`` callable; the plugin calls it with the classes
  (or, for tools, the :class:`~hermes_core.kinds.Tool` objects) it offers. The config then decides
  which registered classes are instantiated.
* **Instance hooks** are implemented by the *objects* the kernel instantiates from those classes:
  memory providers, the one context engine, platform adapters. The kernel registers each instance
  with the plugin manager, so a method marked ``@hookimpl`` takes part in the hook.

The kernel calls instance hooks one implementation at a time and catches what each raises (logged
with the plugin's name), so one plugin's failure never spoils a hook for the others; results arrive
as a list in call order unless a hook says "first result wins". Implementations may accept fewer
arguments than the spec lists (pluggy's opt-in arguments): take only what you use, and your plugin
keeps working when later versions add arguments.

The reference for plugin authors, one section per hook with a runnable example, is ``docs/reference/``
(one page per kind); a test fails when a hook below has no section there or no test exercising it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

from ._agent_hookspecs import *  # noqa: F403 (the agent's own points: MODULE_HOOKS)
from ._markers import PROJECT_NAME, hookspec

if TYPE_CHECKING:
    from pathlib import Path

    from .config import LoadedConfig
    from .doctor import DoctorCheck
    from .kinds import Tool
    from .storage.transfer import CopyProgress, CopyReport, StorageSide
    from .types import (
        CompressionResult,
        Dispatcher,
        EndReason,
        ForgetReport,
        MemoryWrite,
        Message,
        Session,
        SwitchReason,
        ToolCall,
        ToolOutcome,
        Usage,
    )


#: The hook names of each family; used by the kernel and by the docs meta-test.
REGISTRY_HOOKS = (
    "register_memory_providers", "register_context_engines", "register_tools", "register_platforms",
    "register_commands", "register_embedders", "register_llm_clients",
)
MEMORY_HOOKS = (
    "on_message", "system_prompt_block", "prefetch", "queue_prefetch", "sync_turn",
    "on_turn_cancelled", "on_pre_compress", "on_session_switch", "on_session_end",
    "on_memory_write", "shutdown", "load_session", "forget", "on_erasure", "on_delegation",
)
CONTEXT_ENGINE_HOOKS = (
    "should_compress", "compress", "update_from_response", "on_turn_start", "on_prompt_assembled",
    "describe_context",
)
TOOL_HOOKS = ("get_tools", "on_post_compress", "on_pre_tool_call", "on_post_tool_call")
PLATFORM_HOOKS = ("connect", "disconnect", "send")
#: implemented by plugin modules: called by the kernel's commands about every plugin's stores, and
#: at the agent's own points in a conversation (defined in ``_agent_hookspecs``)
MODULE_HOOKS = ("doctor_checks", "copy_storage", "import_sessions", "on_turn_begin",
                "tool_batch_note", "pre_compaction_flush", "on_turn_end", "on_agent_reset",
                "on_agent_close")

__all__ = sorted({*REGISTRY_HOOKS, *MEMORY_HOOKS, *CONTEXT_ENGINE_HOOKS, *TOOL_HOOKS,
                  *PLATFORM_HOOKS, *MODULE_HOOKS})


def create_plugin_manager() -> pluggy.PluginManager:
    """A new PluginManager with every hermes-core hookspec added and nothing registered."""
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(sys.modules[__name__])
    return pm


# ---- Registry hooks: implemented by plugin modules -----------------------------------------------


@hookspec
def register_memory_providers(register: Callable[[type], None]) -> None:
    """Offer memory-provider classes.

    Called once when the plugin manager is built. Call ``register(cls)`` for each class; ``cls``
    must carry ``name`` (unique among memory providers, used in ``memory.providers``) and may carry
    ``Config``, a pydantic model for its config section. Providers listed in ``memory.providers``
    are instantiated as ``cls(config=<validated Config>, context=<PluginContext>)``.

    Returns nothing. Two plugins registering one name is an error naming both.
    """


@hookspec
def register_context_engines(register: Callable[[type], None]) -> None:
    """Offer context-engine classes.

    Called once when the plugin manager is built. Same contract as
    :func:`register_memory_providers`; exactly one engine, the one named by ``context.engine``
    (default ``compressor``), is instantiated.
    """


@hookspec
def register_tools(register: Callable[[Tool], None]) -> None:
    """Offer stand-alone tools.

    Called once when the plugin manager is built. Call ``register(tool)`` with a
    :class:`~hermes_core.kinds.Tool`: name, description, JSON schema (or a pydantic input model),
    handler and parallel-safe flag. Tools that need a provider's state are offered by the provider
    instance through :func:`get_tools` instead. Two plugins registering one tool name is an error
    naming both.
    """


@hookspec
def register_platforms(register: Callable[[type], None]) -> None:
    """Offer platform-adapter classes (CLI chat, webhook, chat services).

    Called once when the plugin manager is built. Same contract as
    :func:`register_memory_providers`; an adapter is instantiated when its front end is started.
    """


@hookspec
def register_commands(register: Callable[[Any], None]) -> None:
    """Offer ``hermes-core`` sub-commands.

    Called when the command line needs the plugin commands (``--help``, or a command that is not
    the kernel's). Call ``register(command)`` with a :class:`click.Command` or :class:`click.Group`;
    its name is the sub-command's name (``hermes-core NAME ...``). The kernel's own commands
    (``plugins``, ``config``, ``doctor``, ``setup``, ...) cannot be taken; two plugins registering
    one name is an error naming both, and the first keeps it. A disabled plugin's commands are
    gone, and invoking one says which plugin provides it and how to enable it. The built-in
    plugins register theirs (``memory``, ``sessions``, ``skills``, ``inspect``, ``mcp``, ``eval``,
    ``replay``) the same way.
    ``register(command, group="import")`` adds a sub-command to a kernel group instead
    (``hermes-core import NAME``: an importer of another agent's data); ``group="plugins"`` adds
    to ``hermes-core plugins`` (the built-in ``scaffold`` adds ``plugins new``), whose own
    sub-commands cannot be taken.

    Inside a command, ``hermes_core.commands.load_host()`` gives a loaded host.
    """


# ---- Memory lifecycle: implemented by memory-provider instances ----------------------------------


@hookspec
def system_prompt_block(session: Session) -> str | None:
    """Return text for the system prompt, or ``None``.

    Called once when a session's system prompt is assembled (session start, and once after each
    compaction). The kernel labels each block with the provider's name. The prompt then stays
    byte-identical for the session, so return a frozen snapshot, not live state.
    """


@hookspec
def prefetch(query: str, session: Session) -> str | None:
    """Return recalled context for the user message ``query``, or ``None``.

    Called once per user turn, before the first LLM call, on a worker thread under a per-provider
    deadline (``memory.prefetch_timeout``, default 0.3 s). Serve what :func:`queue_prefetch`
    prepared; do no slow I/O here. A provider that misses the deadline contributes its previous
    result or nothing. The kernel fences the results in ``<memory-context>``, labelled per provider,
    and adds them to the API copy of the user message only.
    """


@hookspec
def queue_prefetch(query: str, session: Session) -> None:
    """Prepare the recall for the next turn in the background.

    Called after each completed turn on the session's background worker (FIFO, after
    :func:`sync_turn`). May take as long as it needs; it never holds a turn.
    """


@hookspec
def on_message(message: Message, session: Session) -> None:
    """Record a message the moment it joins the session's history.

    Called synchronously, in order, on the turn's thread: the user message as soon as it arrives
    (before prefetch), then each assistant and tool message as it is produced. This is how the
    session archive stores every message at once; keep it to fast local I/O, and use
    :func:`sync_turn` for anything slow. The message is the one the user sent, never the API copy
    with recalled ``<memory-context>`` added.
    """


@hookspec
def sync_turn(
    user_message: Message, assistant_message: Message, session: Session, messages: list[Message]
) -> None:
    """Store a completed turn.

    Called after each completed turn on the session's background worker, in turn order; not for
    a cancelled turn (its messages reach ``on_message`` all the same) nor a subagent's.
    ``messages`` is the session's whole history up to and including the turn.
    """


@hookspec
def on_turn_cancelled(user_message: Message, session: Session, messages: list[Message]) -> None:
    """A user turn was cancelled (``Agent.cancel()``): it gets this instead of :func:`sync_turn`
    and :func:`queue_prefetch`.

    Called on the session's background worker, in turn order with the other turns'
    ``sync_turn``; not for a subagent's turn. ``user_message`` is the turn's user message (the
    one ``on_message`` received), ``messages`` the session's history up to the cancellation (its
    messages reached ``on_message`` as they came). Store nothing of it as a turn.
    """


@hookspec
def on_pre_compress(messages: list[Message], session: Session) -> str | None:
    """Return what a compaction summary should keep, or ``None``.

    Called just before the context engine compresses ``messages``; the returned texts are given to
    the summariser.
    """


@hookspec
def on_session_switch(
    new_session: Session, old_session: Session | None, reason: SwitchReason
) -> None:
    """Follow the agent to another session.

    Called on the session's background worker (ordered with pending syncs) when the active session
    changes: ``reason`` is ``new``, ``resume``, ``compression``, ``branch`` or ``reset``. A
    compaction is a switch to a child session (``new_session.parent_session_id`` is the old id), not
    an end: :func:`on_session_end` is not called for it.
    """


@hookspec
def on_session_end(session: Session, messages: list[Message], reason: EndReason) -> None:
    """The session really ended (exit, ``/new``, expiry, shutdown): extract or flush what you keep.

    Called once per session, with its whole history; never for a compaction.
    """


@hookspec
def on_memory_write(write: MemoryWrite) -> None:
    """Mirror a successful write to another provider's store.

    Called on every active provider except the one that wrote, after the write reached disk.
    """


@hookspec
def on_delegation(task: str, result: str, child_session_id: str, status: str,
                  session: Session) -> None:
    """A child agent the model delegated ``task`` to has finished.

    Called on the delegating agent's providers (under a deadline, on the turn's path, once per
    child, after the ``delegate_task`` call's children are done). ``result`` is the child's final
    answer as the parent receives it (or the error text); ``status`` is ``completed``,
    ``failed``, ``timed_out``, ``budget_exhausted`` or ``cancelled``; ``child_session_id`` is the
    child's archived session (its ``parent_session_id`` is ``session.id``); ``session`` is the
    delegating session. The child's own turns never reach ``sync_turn``: record here what the
    user's memory should keep of the delegated work, if anything. Return nothing.
    """


@hookspec
def shutdown() -> None:
    """Release resources: called once, in reverse activation order, after the worker drained."""


@hookspec(firstresult=True)
def load_session(
    platform: str, conversation_key: str | None, session_id: str | None
) -> tuple[Session, list[Message]] | None:
    """Return a stored session to resume and its history, or ``None`` when there is none.

    Called by the dispatcher the first time it serves a conversation key since the process
    started (and by ``hermes-core chat --continue``), before the agent is built. Which session:
    the one named by ``session_id`` when it is given; else the newest session on ``platform``
    whose ``attributes["conversation_key"]`` equals ``conversation_key``; else, when
    ``conversation_key`` is ``None``, the session on ``platform`` used last. Follow it to the newest
    session of its compaction chain and return that :class:`Session` (with its ``attributes``)
    and its messages in order, ready to be the agent's history. An archive answers; other
    providers leave the hook alone. First result wins.
    """


# ---- Tools offered by instances (memory providers, the context engine) ---------------------------


@hookspec
def get_tools() -> list[Tool]:
    """Return the tools this instance offers the model (may be empty).

    Called when a session's tool list is built. Tool names are global: a name offered twice, by
    this hook or by :func:`register_tools`, is an error naming both plugins.
    """
    return []  # never run: pluggy calls implementations, not the spec


@hookspec
def on_post_compress(messages: list[Message], session: Session) -> str | None:
    """Return a note to append to a freshly compacted history, or ``None``.

    Called right after the context engine's :func:`compress`, before the conversation moves to
    the child session, with the compacted ``messages`` and the ``session`` that was compacted.
    Meant for working state a summary may blur, such as the open items of a task list (the
    ``todo`` tool implements it). Any plugin may implement it: a tool plugin's module, a
    provider or an engine instance. The kernel joins the notes (blank line between) and merges
    them into the user side of the compacted history: onto its final tool result when it ends
    with one, else at the start of its last user message, so alternation and tool pairs stay
    intact.
    """


# ---- Context engine: implemented by the one active engine instance -------------------------------


@hookspec(firstresult=True)
def should_compress(
    messages: list[Message], prompt_tokens: int | None, session: Session | None
) -> bool | None:
    """Return whether the history must be compacted before the next LLM call.

    Called before each LLM call. ``prompt_tokens`` is the last prompt size the API reported for
    this session, or ``None`` before the first call; ``session`` is the session the history belongs
    to (``None`` outside a session, e.g. ``context estimate``). First result wins (there is one
    engine).
    """


@hookspec(firstresult=True)
def compress(
    messages: list[Message], focus_topic: str | None, memory_context: str, session: Session | None
) -> CompressionResult | None:
    """Return the compacted history.

    Called when :func:`should_compress` said so, or on ``/compress [focus]``. ``focus_topic`` steers
    the summary; ``memory_context`` is what the providers' :func:`on_pre_compress` returned;
    ``session`` is the session being compacted (the kernel then opens its child), so an engine that
    keeps state per conversation knows where the history belongs. The returned history must keep
    user/assistant alternation and never split a tool call from its result. First result wins.
    """


@hookspec
def update_from_response(usage: Usage) -> None:
    """Record the token usage the LLM reported for one API call.

    Called after every LLM call of a turn (tool-loop iterations included), with input, output and
    cache read/write token counts; engines use it to decide from real counts, not estimates.
    """


# ---- Platform adapters: implemented by adapter instances -----------------------------------------


@hookspec
def connect(dispatcher: Dispatcher) -> None:
    """Start receiving messages.

    Called when the front end starts. Hand each incoming message to ``dispatcher.handle`` (or
    ``dispatcher.stream``) and deliver the reply; return once listening (run servers on your own
    thread).
    """


@hookspec
def disconnect() -> None:
    """Stop receiving messages and release resources; called once at shutdown."""


@hookspec
def send(conversation_key: str, text: str) -> Any:
    """Deliver a message the agent initiates (not a reply) to ``conversation_key``."""


# ---- Forgetting: implemented by memory providers (and any plugin instance that keeps user data) ----


@hookspec
def forget(subject: str, scope: str, dry_run: bool) -> ForgetReport | None:
    """Delete everything this plugin keeps that mentions ``subject``.

    Called by ``hermes-core forget TEXT`` (and any front end offering "forget this"), once with
    ``dry_run=True`` to show what each provider would delete, then with ``dry_run=False`` to
    delete it. Not called during a turn.

    ``subject`` is the text to forget, stripped, at least three characters; match it without
    regard to case and runs of whitespace (what "mentions" means beyond that - whole entries,
    whole messages - is the provider's choice and belongs in its docs). ``scope`` is ``"all"``
    (everything the provider keeps, for every user) or ``"user:<key>"`` (only what it keeps for
    that user, under ``memory.scope: user``); a provider that cannot tell users apart deletes
    nothing for a user scope and says so in ``cannot_delete``.

    Return a :class:`~hermes_core.types.ForgetReport`: ``matched`` and ``deleted`` counts,
    ``items`` (one short line each), ``dry_run`` echoed, and ``cannot_delete`` when the backend
    offers no way to delete some of what matched (then say what the user can do instead). After a
    real run nothing that mentions the subject may be recalled any more: not by ``prefetch``, not
    by the provider's tools or search. Deleting must be all-or-nothing per provider: raise (with a
    message naming what went wrong) rather than leave half of it deleted. Return ``None`` when
    the provider keeps nothing that could match. A version history that keeps old texts must
    drop the forgotten text too.
    """


@hookspec
def on_erasure(generation: int) -> None:
    """Something was erased from the stores, maybe by another process or node: drop what you
    keep in memory that could still hold it.

    ``forget``, ``memory rollback`` and ``sessions delete`` raise the stores' erasure generation
    once their deletion is committed (:mod:`hermes_core.storage.erasures`); a running server reads
    it before each turn and, when it moved, calls this once per process with the new
    ``generation``, then rebuilds each live conversation from the stores before its next turn
    (history reloaded, system prompt assembled afresh). Drop frozen snapshots, prepared recalls
    and caches of stored text here; the next ``system_prompt_block`` or ``prefetch`` reads the
    stores again. Called on memory providers and the context engine, under a deadline; return
    nothing.
    """


@hookspec
def on_turn_start(session: Session) -> None:
    """A user turn starts in ``session`` (before the user message is recorded).

    Called on the turn's thread, on the context engine only. Reset per-turn state here, such as a
    cap on compactions per turn.
    """


@hookspec
def on_prompt_assembled(session: Session, overhead_tokens: int) -> None:
    """The system prompt and tool list were (re)built: together they take ``overhead_tokens``.

    Called on the context engine when a session's prompt is assembled (session start, after each
    compaction, ``/new``), with the kernel's estimate of what surrounds the history in every
    request. Add it to your own estimates of the prompt size.
    """


# ---- Inspection: implemented by the context engine -----------------------------------------------


@hookspec(firstresult=True)
def describe_context(messages: list[Message], session: Session | None) -> dict[str, Any] | None:
    """Describe, without doing anything, what the engine sees in ``messages`` and would do.

    Called by ``hermes-core context show SESSION_ID`` and ``context estimate FILE`` (never during
    a turn) on the engine selected by ``context.engine``. ``session`` is the stored session the
    history comes from, ``None`` for a file. Nothing may be written and no LLM called.

    Return a JSON-serialisable ``dict`` with at least ``engine`` (your name), ``messages`` (how
    many), ``tokens`` (your estimate of the prompt), ``context_window``, ``threshold_tokens``,
    ``over_threshold`` (bool) and ``lines`` (a list of str: the human-readable report the command
    prints), plus any engine-specific detail (what a compaction would keep, archive, summarise).
    ``None`` means the engine cannot describe itself. First result wins.
    """


# ---- Embedders: a registry hook (the classes are selected by ``embeddings.embedder``) ------------


@hookspec
def register_embedders(register: Callable[[type], None]) -> None:
    """Offer embedder classes (subclasses of :class:`hermes_core.kinds.Embedder`) for semantic search.

    Called once when the plugin manager is built. Same contract as
    :func:`register_memory_providers`: each class has a ``name`` and optionally a ``Config``
    model; ``embeddings.embedder`` selects one by name (``auto``: the local embedder when
    installed, ``none``: word search only). An embedder turns texts into unit vectors:
    ``embed(texts)``, ``dimension`` and ``model_id``; it is instantiated lazily and may load a
    model on first use.
    """


# ---- LLM clients: a registry hook (selected by ``llm.client`` / ``llm.auxiliary_client``) ------------


@hookspec
def register_llm_clients(register: Callable[[type], None]) -> None:
    """Offer model client classes (subclasses of :class:`hermes_core.kinds.LLMClient`).

    Called once when the plugin manager is built. Same contract as
    :func:`register_memory_providers`: each class has a ``name`` and optionally a ``Config``
    model (its own config.yaml section, for vendor settings). ``llm.client`` selects the client
    of the main model, ``llm.auxiliary_client`` the one of summaries and memory reviews (default:
    the same). The kernel builds the selected class with ``(config, context)``; it answers
    ``respond``/``complete`` (:class:`hermes_core.llm.ChatLLM`) and raises
    :class:`hermes_core.llm.LLMError` with an :class:`hermes_core.llm.LLMFailure` for every failure.
    """


# ---- A plugin's stores: implemented by plugin modules (selected for a slot or not) ---------------


@hookspec
def doctor_checks(home: Path, config: LoadedConfig) -> list[DoctorCheck] | None:
    """Check what this plugin keeps or needs, for ``hermes-core doctor``.

    Called once per ``doctor`` run on every loaded plugin module (selected in ``memory.providers``
    or ``context.engine`` or not), under a deadline, after the kernel's own checks. ``home`` is the
    home folder, ``config`` the loaded config (the defaults when config.yaml is invalid; read your
    section with :func:`hermes_core.config.validate_section` and fall back to your defaults if it
    raises). Only read: never create, repair or rewrite anything.

    Return a list of :class:`hermes_core.doctor.DoctorCheck` (name, ok, detail, warning, fix),
    printed labelled with the plugin; ``None`` or ``[]`` when there is nothing to check. An
    implementation that raises, is late or returns something else becomes one failed check naming
    the plugin, the hook and the error; ``doctor`` itself goes on.
    """


@hookspec
def copy_storage(source: StorageSide, target: StorageSide, progress: CopyProgress
                 ) -> CopyReport | None:
    """Copy this plugin's store(s) from ``source`` to ``target`` (``hermes-core storage migrate``).

    Called once per ``storage migrate --to URL`` (``source`` is this home's files, ``target`` the
    database) or ``--from URL`` (the other way) on every loaded plugin module, selected or not,
    one at a time, without a deadline. A :class:`~hermes_core.storage.transfer.StorageSide` has
    ``home``, ``config`` and ``url`` (``None`` for the files). Read the source only; skip what the
    target already holds, never overwrite it, so the command can run again; report long tasks
    with ``progress(task, done, total)``.

    Return a :class:`~hermes_core.storage.transfer.CopyReport` (counts copied and skipped per kind,
    summary lines, JSON detail), or ``None`` when the plugin keeps no store. Raise an error saying
    what could not be copied and how to fix it: the command names the plugin, lets the others
    copy theirs, and exits with 1.
    """


@hookspec
def import_sessions(target: StorageSide, path: Path, dry_run: bool, progress: CopyProgress
                    ) -> CopyReport | None:
    """Store the sessions of ``path`` in this plugin's session archive (an importer's way in).

    ``path`` is a JSON Lines file in the archive export format (``hermes-core-session/1``: a
    ``session`` line, then its ``message`` lines; docs/reference/stores.md), written by an
    importer such as ``hermes-core import hermes``. Called once, on every loaded plugin module, on
    the caller's thread and without a deadline; ``target`` is this home (its ``config`` says
    which backend, ``url`` the database when ``storage.url`` is set). A session whose id the
    archive already holds is skipped, never overwritten, so an import can run again and adds
    nothing; a parent must come before its compaction children in the file. With ``dry_run``
    nothing is written and the counts say what would be. Report progress with
    ``progress(task, done, total)``.

    Return a :class:`~hermes_core.storage.transfer.CopyReport` (``copied`` sessions and messages,
    ``skipped`` sessions already there), or ``None`` when the plugin keeps no session archive.
    Raise an error naming the file, the line and the fix for a malformed file.
    """


# ---- Around every tool call: implemented by memory providers, the context engine and plugin modules ----


@hookspec
def on_pre_tool_call(call: ToolCall, session: Session | None, plugin: str) -> str | None:
    """A tool call is about to run: ``call`` (name, arguments, id) of the tool that ``plugin``
    owns, in ``session`` (``None`` outside a conversation).

    Called for every tool call the kernel's tool runner makes (the model's calls, the memory
    review's and flush's, any plugin's tools), on the calling thread, each implementation under
    ``hooks.timeouts.on_pre_tool_call``. Every implementation is called, so observers see each
    call. Return ``None`` to let the call run, or a non-empty reason to block it: the tool does
    not run and the model reads an error result naming the blocking plugin and the reason (the
    first reason, in call order, wins). An implementation that raises, is late or answers
    something other than text is logged and counts as ``None``: it never blocks or fails a call.
    """


@hookspec
def on_post_tool_call(call: ToolCall, session: Session | None, outcome: ToolOutcome) -> None:
    """A tool call ended: ``outcome`` holds what the model will read (``content``,
    ``is_error``), the owning ``plugin``, ``seconds`` and, for a call an ``on_pre_tool_call``
    blocked, ``blocked_by`` (the blocking plugin). Called for every call the runner made or
    blocked, unknown tools excepted, each implementation under
    ``hooks.timeouts.on_post_tool_call``; observe only: the answer is ignored and a failure is
    logged, never the call's.
    """
