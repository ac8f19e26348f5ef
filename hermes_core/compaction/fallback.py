"""The deterministic summary used when the summary model cannot be used.

It is extractive: it copies out what a continuation most needs — the user's requests, stated
constraints and decisions, file paths, commands run, errors seen and concrete values (URLs,
``key=value`` settings, backticked names) — under the same headings as the LLM summary, with the
previous summary carried over, so the middle of a conversation is never dropped without a record.
It is bounded (``max_chars``) and costs a few regex passes over the compacted messages.

:func:`extract_facts` is also used on its own to describe messages that did not fit the summary
model's input bound.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from hermes_core.types import Message

from .markers import is_standalone_summary, original_content
from .redact import redact

__all__ = [
    "MIN_TURN_LINE",
    "Facts",
    "extract_facts",
    "extractive_summary",
    "render_facts",
    "turn_capacity",
    "turn_line",
    "turn_log",
    "user_turn_starts",
]

_PATH_KEYS = ("path", "file", "file_path", "filename", "filepath", "output_path", "target", "dir",
              "directory", "workdir", "cwd", "src", "dest")
_COMMAND_KEYS = ("command", "cmd", "script", "shell")
_PATH = re.compile(
    r"(?<![\w/.:-])((?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+|[\w-]+\.(?:py|pyi|js|mjs|ts|tsx|jsx"
    r"|md|rst|json|jsonl|yaml|yml|toml|txt|go|rs|java|kt|c|h|cc|cpp|hpp|rb|php|sh|sql|html|css"
    r"|cfg|ini|lock|csv|xml|proto|tf|ipynb))(?![\w/-])"
)
#: tool names that change files: their paths matter most to a continuation
_WRITING_TOOL = re.compile(r"write|edit|create|patch|apply|replace|move|rename|delete|remove", re.I)
_URL = re.compile(r"https?://[^\s)\]>'\"`]+")
_BACKTICK = re.compile(r"`([^`\n]{2,60})`")
_ASSIGN = re.compile(r"\b([A-Za-z_][\w.-]{0,40})\s*=\s*([^\s,;]{1,60})")
_SHELL_LINE = re.compile(r"^\s*\$ (.{2,200})$", re.MULTILINE)
_ERROR = re.compile(
    r"\b(?:\w*error|\w*exception|traceback|failed|failure|fatal|denied|refused|not found"
    r"|timed out|cannot|can't)\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_CONSTRAINT = re.compile(
    r"\b(?:must|never|always|don't|do not|avoid|prefer|make sure|only use|without)\b", re.IGNORECASE
)
_DECISION = re.compile(
    r"\b(?:decided|decide to|we'll use|will use|i'll use|chose|choose|instead of|going with"
    r"|switch(?:ed)? to|settled on|the plan is|approach)\b",
    re.IGNORECASE,
)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text[: limit * 2].split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _add(items: list[str], seen: set[str], value: str, limit: int) -> None:
    if value and value not in seen and len(items) < limit:
        seen.add(value)
        items.append(value)


@dataclass
class Facts:
    """What :func:`extract_facts` found, newest last within each list."""

    requests: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    #: paths given to tools that change files (write, edit, create, ...): listed first
    written: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    tools: dict[str, int] = field(default_factory=dict)
    last_reply: str = ""
    messages: int = 0


def _text_of(message: Message) -> str:
    return original_content(message) or ""


def _error_line(text: str) -> str | None:
    """The last line mentioning an error: in a traceback, the exception itself."""
    match = None
    for match in _ERROR.finditer(text):  # noqa: B007 - the last match is the one wanted
        pass
    if match is None:
        return None
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start : end if end >= 0 else len(text)]


def extract_facts(
    messages: Sequence[Message], *, limit: int = 12, scan_chars: int = 300_000
) -> Facts:
    """Scan ``messages``, newest first, so the freshest facts win the limited slots.

    Text is searched with regular expressions until ``scan_chars`` characters have been read;
    older messages then contribute only what costs no text scan (their requests, tool names, and
    the paths and commands in tool arguments). That bounds the cost on very long histories.
    """
    facts = Facts(messages=len(messages))
    scan = _Scan(facts, limit, scan_chars, _commands_by_call(messages))
    for message in reversed(messages):
        text = _text_of(message)
        sample = scan.sample(text)  # None once the budget is spent
        if message.role == "user":
            scan.user(text, sample)
        elif message.role == "assistant":
            scan.assistant(message, text, sample)
        elif message.role == "tool" and sample is not None and len(facts.errors) < 6:
            scan.tool_error(message, sample)
        if sample is not None:
            scan.values(message.role, sample)
    facts.requests = _with_first_request(messages, list(reversed(scan.requests)))
    for name in ("constraints", "decisions", "files", "written", "commands", "errors", "values"):
        setattr(facts, name, list(reversed(getattr(facts, name))))
    return facts


def _commands_by_call(messages: Sequence[Message]) -> dict[str, str]:
    """The command of each tool call that ran one (an error is most useful next to it)."""
    command_of: dict[str, str] = {}
    for message in messages:
        for call in message.tool_calls:
            if isinstance(call.arguments, dict):
                for key in _COMMAND_KEYS:
                    value = call.arguments.get(key)
                    if isinstance(value, str):
                        command_of[call.id] = _clip(value, 120)
                        break
    return command_of


def _with_first_request(messages: Sequence[Message], requests: list[str]) -> list[str]:
    """The first request usually states the overall goal: kept even when newer ones fill the
    list."""
    for message in messages:
        if message.role == "user" and _text_of(message).strip():
            first = _clip(_text_of(message), 300)
            if first not in requests:
                requests.insert(0, first)
            break
    return requests


class _Scan:
    """What :func:`extract_facts` carries from one message to the next (newest first)."""

    def __init__(self, facts: Facts, limit: int, budget: int, command_of: dict[str, str]) -> None:
        self.facts = facts
        self.limit = limit
        self.budget = budget
        self.command_of = command_of
        self.seen: set[str] = set()
        self.requests: list[str] = []
        self.error_lines: set[str] = set()

    def sample(self, text: str) -> str | None:
        """The part of ``text`` to search (its ends when it is long); None when the budget of
        characters to search is spent."""
        if self.budget <= 0:
            return None
        sample = text if len(text) <= 20_000 else text[:10_000] + "\n" + text[-10_000:]
        self.budget -= len(sample)
        return sample

    def user(self, text: str, sample: str | None) -> None:
        _add(self.requests, self.seen, _clip(text, 300), self.limit)
        if sample is not None:
            for sentence in _SENTENCE_END.split(sample)[:40]:
                if _CONSTRAINT.search(sentence):
                    _add(self.facts.constraints, self.seen, _clip(sentence, 200), 8)

    def assistant(self, message: Message, text: str, sample: str | None) -> None:
        facts = self.facts
        if not facts.last_reply and text.strip():
            facts.last_reply = _clip(text, 400)
        for call in message.tool_calls:
            facts.tools[call.name] = facts.tools.get(call.name, 0) + 1
            writes = _WRITING_TOOL.search(call.name) is not None
            _scan_arguments(call.arguments, facts, self.seen, self.limit, writes=writes)
        if sample is not None:
            for sentence in _SENTENCE_END.split(sample)[:40]:
                if _DECISION.search(sentence):
                    _add(facts.decisions, self.seen, _clip(sentence, 200), 8)

    def tool_error(self, message: Message, sample: str) -> None:
        line = _error_line(sample)
        if line is None:
            return
        key = _clip(line, 200)
        # the same error repeated is one fact: dedupe on the line, not on the command
        if key in self.error_lines:
            return
        self.error_lines.add(key)
        command = self.command_of.get(message.tool_call_id or "")
        name = message.tool_name or "tool"
        where = f"{name}: {command}" if command else name
        _add(self.facts.errors, self.seen, f"[{where}] {key}", 6)

    def values(self, role: str, sample: str) -> None:
        """Paths, URLs, inline code, assignments and shell lines in a searched text."""
        facts, seen, limit = self.facts, self.seen, self.limit
        if role != "tool" or len(facts.files) < limit:
            for match in _PATH.finditer(sample):
                _add(facts.files, seen, match[1], limit * 2)
        if role == "tool":
            return
        for match in _URL.finditer(sample):
            _add(facts.values, seen, match[0], limit)
        for match in _BACKTICK.finditer(sample):
            _add(facts.values, seen, f"`{match[1]}`", limit)
        for match in _ASSIGN.finditer(sample):
            _add(facts.values, seen, f"{match[1]}={match[2]}", limit)
        for match in _SHELL_LINE.finditer(sample):
            _add(facts.commands, seen, _clip(match[1], 200), limit)


def _scan_arguments(
    arguments: object, facts: Facts, seen: set[str], limit: int, *, writes: bool = False
) -> None:
    if not isinstance(arguments, dict):
        return
    for key, value in arguments.items():
        if not isinstance(value, str):
            continue
        lowered = str(key).lower()
        if lowered in _PATH_KEYS:
            if writes:
                _add(facts.written, seen, _clip(value, 200), limit * 2)
            else:
                _add(facts.files, seen, _clip(value, 200), limit * 2)
        elif lowered in _COMMAND_KEYS:
            _add(facts.commands, seen, _clip(value, 200), limit)


def _bullets(items: Iterable[str], empty: str = "- (none found)") -> str:
    lines = [f"- {item}" for item in items]
    return "\n".join(lines) if lines else empty


def _sublist(title: str, items: Sequence[str]) -> str:
    if not items:
        return ""
    return f"- {title}:\n" + "".join(f"  - {item}\n" for item in items)


def render_facts(facts: Facts) -> str:
    """A compact digest of ``facts`` (used for messages left out of the summariser's input)."""
    parts = [f"{facts.messages} message(s)."]
    if facts.requests:
        if len(facts.requests) > 6:
            parts.append(f"First user request: {facts.requests[0]}")
        parts.append("Latest user requests: " + " | ".join(facts.requests[-6:]))
    # each list: its label, how many of its newest items are given, and how they are joined
    for label, items, newest, sep in (
        ("Files changed", facts.written, 20, ", "), ("Files read or mentioned", facts.files, 20, ", "),
        ("Commands", facts.commands, 6, " | "), ("Errors", facts.errors, 4, " | "),
        ("Decisions", facts.decisions, 4, " | "),
    ):
        if items:
            parts.append(f"{label}: " + sep.join(items[-newest:]))
    if facts.tools:
        parts.append("Tools used: " + ", ".join(f"{k} x{v}" for k, v in sorted(facts.tools.items())))
    return redact("\n".join(parts))


#: the shortest line a compacted user turn gets in the fallback's turn log (its number, who
#: asked, the start of the request); below this a turn is kept verbatim instead (see capacity)
MIN_TURN_LINE = 64
#: the longest line a turn gets when there is room
MAX_TURN_LINE = 420
#: characters set aside for the other sections (goal, constraints, errors, files, ...)
_SECTIONS_RESERVE = 1_600


def user_turn_starts(messages: Sequence[Message]) -> list[int]:
    """Indices of the user messages that start a turn (not stand-alone earlier summaries)."""
    return [i for i, m in enumerate(messages)
            if m.role == "user" and not is_standalone_summary(m)]


def _carried(previous_summary: str | None, max_chars: int) -> str:
    if not previous_summary:
        return ""
    # the earlier summary keeps up to half the space: it is the only record of older turns
    budget = max(1_000, max_chars // 2)
    kept = redact(previous_summary.strip())
    if len(kept) > budget:
        kept = kept[: budget - 40].rstrip() + "\n[... earlier summary shortened ...]"
    return f"\n\n## Earlier Summary (carried over)\n{kept}"


def _log_room(max_chars: int, previous_summary: str | None) -> int:
    reserve = min(_SECTIONS_RESERVE, max_chars // 4)
    return max(0, max_chars - len(_carried(previous_summary, max_chars)) - reserve - 80)


def turn_capacity(max_chars: int, previous_summary: str | None = None) -> int:
    """How many user turns the fallback can give a line each within ``max_chars``.

    A compaction whose middle holds more user turns summarises only the oldest this many and
    keeps the newer ones verbatim, so no user turn is ever dropped without a record.
    """
    return _log_room(max_chars, previous_summary) // (MIN_TURN_LINE + 1)


def _first_sentence(text: str, limit: int) -> str:
    for sentence in _SENTENCE_END.split(text.strip()):
        if sentence.strip():
            return _clip(sentence, limit)
    return ""


def _turn_facts(messages: Sequence[Message]) -> tuple[str, list[str], str]:
    """(decision or outcome, file paths, first error) of one turn's non-user messages."""
    decision = ""
    outcome = ""
    files: list[str] = []
    seen: set[str] = set()
    error = ""
    for message in messages:
        text = _text_of(message)
        sample = text if len(text) <= 8_000 else text[:4_000] + "\n" + text[-4_000:]
        if message.role == "assistant":
            for call in message.tool_calls:
                if isinstance(call.arguments, dict):
                    for key, value in call.arguments.items():
                        if str(key).lower() in _PATH_KEYS and isinstance(value, str):
                            _add(files, seen, _clip(value, 80), 4)
            if not decision:
                for sentence in _SENTENCE_END.split(sample)[:40]:
                    if _DECISION.search(sentence):
                        decision = _clip(sentence, 200)
                        break
            if sample.strip():
                outcome = _first_sentence(sample, 200)
        if message.role != "tool":
            for match in _PATH.finditer(sample):
                _add(files, seen, match[1], 4)
        elif not error:
            line = _error_line(sample)
            if line is not None:
                error = _clip(f"{message.tool_name or 'tool'}: {line}", 160)
    return decision or outcome, files, error


def turn_line(messages: Sequence[Message], start: int, end: int, number: int, width: int) -> str:
    """One bounded line (at most ``width`` characters) for the user turn ``messages[start:end]``:
    who asked what, what was decided (or the reply's gist), the files and the first error."""
    asker = messages[start].meta.get("user_name") or messages[start].meta.get("name") or "user"
    head = f"{number}. {asker}: "
    request = _clip(_text_of(messages[start]), max(24, int(width * 0.5)))
    decision, files, error = _turn_facts(messages[start + 1 : end])
    line = head + request
    extras = []
    if decision:
        extras.append(f" -> {decision}")
    if files:
        extras.append(f" [files: {', '.join(files)}]")
    if error:
        extras.append(f" [error: {error}]")
    # the request first, then decision, files and error while at least 20 characters are left
    for left, extra in zip(range(len(extras), 0, -1), extras, strict=True):
        room = width - len(line)
        if room < 20:
            break
        share = max(20, room // left)
        line += extra if len(extra) <= share else extra[: share - 1] + "…"
    return _clip(line, width)


def turn_log(messages: Sequence[Message], room: int) -> list[str]:
    """A line per user turn of ``messages``, oldest first, sharing ``room`` characters."""
    starts = user_turn_starts(messages)
    if not starts:
        return []
    width = max(MIN_TURN_LINE, min(MAX_TURN_LINE, room // len(starts) - 3))
    ends = [*starts[1:], len(messages)]
    pairs = zip(starts, ends, strict=True)
    return [turn_line(messages, s, e, n, width) for n, (s, e) in enumerate(pairs, 1)]


def extractive_summary(
    messages: Sequence[Message],
    *,
    reason: str,
    previous_summary: str | None = None,
    focus_topic: str | None = None,
    max_chars: int = 8_000,
) -> str:
    """A summary of ``messages`` built without a model; at most ``max_chars`` characters.

    Every user turn of ``messages`` gets a line of its own (who asked what, what was decided,
    files, errors) in "## Compacted Turns", as long as ``messages`` holds no more user turns than
    :func:`turn_capacity` allows for ``max_chars`` (the engine makes sure of that).
    """
    facts = extract_facts(messages)
    first = facts.requests[0] if facts.requests else "(no user request in the compacted turns)"
    latest = facts.requests[-1] if facts.requests else None
    goal = f"- First request in the compacted turns: {first}"
    if latest and latest != first:
        goal += f"\n- Latest request in the compacted turns: {latest}"
    if focus_topic:
        goal += f"\n- Requested focus for this compaction: {_clip(focus_topic, 200)}"
    tools = ", ".join(f"{name} x{count}" for name, count in sorted(facts.tools.items()))
    done = f"- Tool calls made: {tools}" if tools else "- (no tool calls in the compacted turns)"
    doing = f"- Last reply in the compacted turns: {facts.last_reply}" if facts.last_reply else "- (unknown)"
    critical = _sublist("Commands run", facts.commands) + _sublist("Values mentioned", facts.values)
    critical += (
        f"- This summary was extracted mechanically from {facts.messages} message(s) because "
        f"{reason}. Details not listed here are in the session archive."
    )
    sections = [
        ("## Goal", goal),
        ("## Constraints & Preferences", _bullets(facts.constraints)),
        (
            "## Progress",
            f"### Done\n{done}\n### In Progress\n{doing}\n### Blocked\n"
            + _bullets(facts.errors, "- (no errors seen)"),
        ),
        ("## Key Decisions", _bullets(facts.decisions)),
        ("## Relevant Files", _bullets([*(f"{p} (changed)" for p in facts.written), *facts.files])),
        ("## Next Steps", "- Continue from the latest user message after this summary."),
        ("## Critical Context", critical),
    ]
    text = redact("\n\n".join(f"{title}\n{body}" for title, body in sections))
    carried = _carried(previous_summary, max_chars)
    lines = turn_log(messages, _log_room(max_chars, previous_summary))
    log = ""
    if lines:
        log = redact("\n\n## Compacted Turns (one line per user turn, oldest first)\n"
                     + "\n".join(lines))
    room = max_chars - len(carried) - len(log)
    if len(text) > room:
        text = text[: max(0, room - 40)].rstrip() + "\n[... fallback summary truncated ...]"
    return text + log + carried
