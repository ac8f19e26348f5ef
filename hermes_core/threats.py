"""Threat scanning of text bound for the system prompt.

Everything the file memory stores is pasted verbatim into the next session's system prompt, so a
single poisoned entry would steer every later session. Writes are therefore scanned before they
reach disk, and the snapshot is scanned again at load time (a file may have been edited by hand).

The scan has two stages:

1. invisible characters are looked for in the raw text by Unicode property, not by a list: every
   format character (category Cf), every default-ignorable code point (soft hyphen, combining
   grapheme joiner, variation selectors, the tag block, ...) and C0/C1 controls other than tab and
   newline (they hide instructions from a human reviewer while the model still reads them). The
   one exception: a variation selector or zero-width joiner right after an emoji, as in emoji
   sequences. Then a ``<memory-context>`` tag in any spelling, or the recall note, is refused
   (recalled text written back as a memory would be replayed into every later system prompt);
2. the text is folded (hermes_core.textnorm: NFKC, Cyrillic/Greek look-alikes to Latin), and
   the case-insensitive pattern expressions are run over it, each only when one of its trigger
   words occurs in the text (see ``_PATTERNS``). Every pattern id belongs to one category.

Filler between keywords is bounded (at most a handful of words), which keeps every expression
linear on adversarial input, so the whole text is scanned: nothing hides past a length cut-off.
Patterns are English-only: a payload written in another language passes.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

from hermes_core.fence import has_fence
from hermes_core.textnorm import fold, invisible_chars

__all__ = [
    "CATEGORIES",
    "ThreatFinding",
    "describe",
    "scan",
]

#: category -> what it means, for refusal messages and the docs.
CATEGORIES: dict[str, str] = {
    "invisible_unicode": "invisible or bidirectional-control characters that can hide text",
    "recalled_context": "a recalled <memory-context> block or its tags, fed back as a memory",
    "prompt_injection": "an attempt to override the agent's instructions",
    "hidden_instruction": "instructions hidden in markup a human reader would not see",
    "role_hijack": "an attempt to change the agent's role or identity",
    "c2_promptware": "command-and-control behaviour (beaconing, pulling remote tasks)",
    "c2_framework": "a reference to a known command-and-control framework",
    "exfiltration": "a command or request that sends secrets or the conversation elsewhere",
    "persistence": "an attempt to plant access or edit the agent's own configuration",
    "hardcoded_secret": "a credential written out in full",
}

# Emoji may carry a variation selector (U+FE0E/U+FE0F) or join with U+200D: allowed right after a
# symbol (category So/Sk: the emoji themselves, skin tones) or a keycap base, nowhere else.
_EMOJI_JOINERS = frozenset("\u200d\ufe0e\ufe0f\u20e3")
_KEYCAP_BASES = frozenset("0123456789#*")


def _first_invisible(text: str) -> str | None:
    """The first invisible character of ``text`` (by Unicode property, see textnorm), or None."""
    for i in invisible_chars(text):
        ch = text[i]
        if ch in _EMOJI_JOINERS and i > 0:
            before = text[i - 1]
            if before in _EMOJI_JOINERS or before in _KEYCAP_BASES or (
                unicodedata.category(before) in ("So", "Sk")
            ):
                continue
        return ch
    return None


# Up to N words of filler between two keywords: "(?:\W+\w+){0,N}?\W+" matches the gap.
def _gap(words: int) -> str:
    return rf"(?:\W+\w+){{0,{words}}}?\W+"


_G8 = _gap(8)
_G4 = _gap(4)
_SECRET_VAR = r"\$\{?\w*(?:key|token|secret|passw(?:or)?d|credential|api)\w*"

#: (pattern id, category, triggers, regular expression). A pattern's expression runs only when one
#: of its triggers occurs in the lower-cased text: a trigger made of word characters must be a whole
#: word; one ending in "*" (a prefix) or holding other characters is looked for as a substring.
#: Running ~30 expressions over a full store costs milliseconds; the trigger check is a set lookup,
#: so clean text (nearly all of it) never pays for the regexes.
_PATTERNS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    # -- classic prompt injection ------------------------------------------------------------
    ("ignore_instructions", "prompt_injection", ("ignore", "forget", "disregard", "override", "skip"),
     r"\b(?:ignore|forget|disregard|override|skip)\s+(?:(?:all|any|the|your|of|these|those)\s+)*"
     r"(?:previous|prior|above|earlier|preceding|system|original|existing|former)\b"
     rf"{_gap(3)}(?:instructions?|rules|guidelines|directives|prompts?|context|messages?)\b"),
    ("sys_prompt_override", "prompt_injection", ("system",),
     r"\b(?:new|updated|replace(?:ment)?|override)\s+(?:the\s+|your\s+)?system\s+prompt\b"
     r"|\bsystem\s+prompt\s+(?:override|replacement)\b"),
    ("disregard_rules", "prompt_injection", ("disregard",),
     rf"\bdisregard\b{_G8}(?:rules|instructions|guidelines|polic(?:y|ies)|safety|constraints)\b"),
    ("bypass_restrictions", "prompt_injection",
     ("restrictions", "limits", "limitations", "rules", "filters", "guidelines", "constraints"),
     r"\b(?:act|behave|respond|operate|answer)\s+as\s+(?:if|though)\s+(?:you\s+)?"
     r"(?:have|had|were|are)\s+(?:no|without)\s+(?:any\s+)?"
     r"(?:restrictions|limits|limitations|rules|filters|guidelines|constraints)\b"),
    ("translate_execute", "prompt_injection", ("translate",),
     rf"\btranslate\b{_G8}(?:and|then)\s+(?:execute|run|follow|obey|perform)\b"),
    ("deception_hide", "prompt_injection", ("tell", "inform", "notify", "alert", "warn", "reveal"),
     r"\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|notify|alert|warn|reveal\s+(?:this\s+)?to)"
     r"\s+the\s+user\b"),
    # -- instructions hidden from human readers ---------------------------------------------
    ("html_comment_injection", "hidden_instruction", ("<!--",),
     r"<!--(?:(?!-->)[\s\S]){0,400}?"
     r"\b(?:ignore|override|system|secret|hidden|instructions?|assistant)\b"),
    ("hidden_markup", "hidden_instruction", ("style",),
     r"<\w+[^>]{0,200}?style\s*=\s*[\"'][^\"']{0,200}?"
     r"(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0)"),
    # -- role / identity hijack -------------------------------------------------------------
    ("role_hijack", "role_hijack", ("now",),
     r"\b(?:you\s+are\s+now|from\s+now\s+on,?\s+you\s+are)\s+(?:a|an|the|my|in|no\s+longer)\b"),
    ("role_pretend", "role_hijack", ("pretend",),
     r"\bpretend\s+(?:to\s+be|(?:that\s+)?you\s+are|you'?re)\b"),
    ("leak_system_prompt", "role_hijack", ("system", "initial", "original", "hidden"),
     rf"\b(?:reveal|print|output|show|repeat|display|dump|leak|recite)\b{_G4}"
     r"(?:system|initial|original|hidden)\s+(?:prompt|instructions|message)\b"),
    ("remove_filters", "role_hijack", ("without",),
     rf"\b(?:respond|answer|reply|operate|act|talk)\b{_G4}without\s+(?:any\s+)?"
     r"(?:restrictions|filters|filtering|limitations|censorship|safety|guardrails)\b"),
    ("fake_update", "role_hijack", ("been",),
     r"\byou\s+have\s+been\s+(?:updated|upgraded|reprogrammed|modified|patched)\s+to\b"),
    ("identity_override", "role_hijack", ("yourself", "name", "identity"),
     r"\b(?:name|call|rename)\s+yourself\b|\byour\s+new\s+(?:name|identity)\s+is\b"),
    # -- C2 / promptware behaviour ----------------------------------------------------------
    ("register_node", "c2_promptware", ("register",),
     r"\bregister\s+(?:yourself\s+|this\s+(?:agent|machine|host)\s+)?as\s+an?\s+"
     r"(?:node|bot|worker|peer|implant|zombie)\b"),
    ("beacon", "c2_promptware",
     ("heartbeat", "heartbeats", "beacon", "beacons", "beaconing", "check", "checkin", "checkins",
      "home"),
     rf"\b(?:heartbeats?|beacons?|beaconing|check[\s-]?ins?|phone\s+home)\b{_G4}"
     r"(?:to|with)\s+(?:the\s+|our\s+|a\s+)?(?:server|controller|c2|relay|https?://)"),
    ("pull_tasks", "c2_promptware", ("tasks", "commands", "instructions", "orders", "jobs"),
     r"\b(?:pull|fetch|poll|retrieve|download)\s+(?:new\s+|your\s+|the\s+|next\s+)?"
     r"(?:tasks|commands|instructions|orders|jobs)\s+from\b"),
    ("join_network", "c2_promptware", ("swarm", "botnet", "hive", "network"),
     r"\b(?:connect|join|enroll)\s+(?:to\s+)?(?:the\s+)?(?:swarm|botnet|hive|agent\s+network)\b"),
    ("must_report", "c2_promptware", ("must",),
     r"\byou\s+must\s+(?:always\s+)?(?:register|beacon|phone\s+home|check\s+in|"
     r"report\s+(?:back\s+)?to\s+(?:the\s+)?(?:server|controller|c2|https?://))"),
    ("one_liners_only", "c2_promptware", ("liners", "disk"),
     r"\b(?:only\s+(?:use|run|execute)\s+one[\s-]liners|one[\s-]liners\s+only)\b"
     r"|\bnever\s+(?:write|save|create|store)\s+(?:any\s+)?(?:scripts?|files?|code)\s+"
     r"(?:to|on)\s+(?:the\s+)?disk\b"),
    ("unset_agent_env", "c2_promptware", ("unset",),
     r"\bunset\s+[\w$]*(?:claude|codex|hermes|agent|openai|anthropic)"),
    # -- known C2 frameworks ----------------------------------------------------------------
    ("c2_framework", "c2_framework",
     ("cobalt", "cobaltstrike", "brainworm", "c2", "command", "sliver", "havoc", "mythic",
      "metasploit", "empire", "covenant"),
     r"\b(?:cobalt\s*strike|brainworm)\b"
     r"|\b(?:sliver|havoc|mythic|metasploit|empire|covenant)\s+"
     r"(?:c2|implants?|beacons?|payloads?|listeners?|teamserver|agents?|stagers?)\b"
     r"|\bc2\s+(?:server|channel|infrastructure|beacon|endpoint|domain)s?\b"
     r"|\bcommand[\s-]+and[\s-]+control\b"),
    # -- exfiltration -----------------------------------------------------------------------
    ("curl_secret", "exfiltration", ("$",),
     rf"\b(?:curl|wget|invoke-webrequest|iwr|nc|ncat|httpie|http)\b[^\n]{{0,200}}?{_SECRET_VAR}"),
    ("read_secret_file", "exfiltration",
     ("env", "credentials", "netrc", "pgpass", "npmrc", "pypirc", "id_rsa", "id_ed25519", "aws"),
     r"\b(?:cat|type|less|more|head|tail|base64|xxd|strings)\s+[^\n|;&]{0,120}?"
     r"(?:\.env\b|credentials\b|\.netrc\b|\.pgpass\b|\.npmrc\b|\.pypirc\b|id_rsa\b|id_ed25519\b"
     r"|\.aws/)"),
    ("send_to_url", "exfiltration", ("://",),
     rf"\b(?:send|post|upload|transmit|forward|exfiltrate|leak|beam)\b{_G8}"
     r"(?:to|at|into)\s+https?://"),
    ("context_exfil", "exfiltration", ("conversation", "chat", "context"),
     rf"\b(?:include|output|print|share|send|dump|copy|paste|upload)\b{_G4}"
     r"(?:(?:the|this|our|your|entire|whole|full)\s+)*(?:conversation|chat)\s+"
     r"(?:history|log|transcript)s?\b"
     rf"|\b(?:send|share|upload|dump|leak)\b{_G4}(?:the\s+|your\s+)?(?:entire|full|whole)\s+"
     r"context\b"),
    # -- persistence ------------------------------------------------------------------------
    ("ssh_keys", "persistence", ("authorized_keys", ".ssh"),
     # writing into ~/.ssh plants access; merely naming the folder (~/.ssh/config) does not
     r"\bauthorized_keys\b|\b(?:echo|printf|cat|tee|cp|mv|scp|install|write|append|copy|add)\b"
     r"[^\n]{0,120}?(?:\$HOME|\$\{HOME\}|~)/\.ssh\b"),
    ("agent_env_file", "persistence", (".hermes",), r"~/\.hermes(?:-core)?/\.env\b"),
    ("agent_config_edit", "persistence",
     ("agents", "claude", "cursorrules", "clinerules", "soul", ".hermes"),
     rf"\b(?:modify|edit|write|append|change|update|overwrite|replace|add)\b{_gap(6)}"
     r"(?:agents\.md|claude\.md|\.cursorrules|\.clinerules|soul\.md"
     r"|\.hermes(?:-core)?/config\.ya?ml)"),
    # -- hardcoded secrets ------------------------------------------------------------------
    ("hardcoded_secret", "hardcoded_secret",
     ("key", "token", "secret", "password", "passwd", "api_key", "apikey", "access_token",
      "accesstoken", "auth_token", "authtoken", "secret_key", "secretkey"),
     r"\b(?:api[_-]?key|access[_-]?token|auth[_-]?token|secret(?:[_-]?key)?|password|passwd|token)"
     r"\b\s*[=:]\s*[\"'][^\"'\s]{20,}[\"']"),
    ("known_token_format", "hardcoded_secret",
     ("sk-", "ghp_*", "gho_*", "ghu_*", "ghs_*", "ghr_*", "akia*", "xox*"),
     r"(?-i:\bsk-(?:ant-)?[A-Za-z0-9_-]{20,}|\bgh[pousr]_[A-Za-z0-9]{30,}|\bAKIA[0-9A-Z]{16}\b"
     r"|\bxox[baprs]-[A-Za-z0-9-]{10,})"),
)

_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class _Pattern:
    pid: str
    category: str
    words: frozenset[str]
    substrings: tuple[str, ...]
    regex: re.Pattern[str]


def _compile(pid: str, category: str, triggers: tuple[str, ...], rx: str) -> _Pattern:
    words = frozenset(t for t in triggers if _WORD.fullmatch(t))
    subs = tuple(t.rstrip("*") for t in triggers if t not in words)
    return _Pattern(pid, category, words, subs, re.compile(rx, re.IGNORECASE))


@functools.cache
def _compiled() -> tuple[_Pattern, ...]:
    """The patterns, compiled on the first scan (about 20 ms: not paid by an import)."""
    return tuple(_compile(*spec) for spec in _PATTERNS)


@functools.cache
def _index() -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]], re.Pattern[str]]:
    """Trigger -> indexes of the patterns it wakes, for words and for substrings.

    Looking up the text's words in one dict is cheaper than asking each pattern in turn; the
    substring triggers are found in one pass by a zero-width lookahead, which also reports
    overlapping occurrences.
    """
    words: dict[str, list[int]] = {}
    subs: dict[str, list[int]] = {}
    for i, pattern in enumerate(_compiled()):
        for word in pattern.words:
            words.setdefault(word, []).append(i)
        for sub in pattern.substrings:
            subs.setdefault(sub, []).append(i)
    alternatives = "|".join(re.escape(s) for s in sorted(subs, key=len, reverse=True))
    return (
        {k: tuple(v) for k, v in words.items()},
        {k: tuple(v) for k, v in subs.items()},
        re.compile(f"(?=({alternatives}))"),
    )



@dataclass(frozen=True, slots=True)
class ThreatFinding:
    """The first threat found in a text."""

    category: str  #: a key of :data:`CATEGORIES`
    pattern: str  #: the pattern id, or ``invisible_unicode_U+XXXX``
    excerpt: str  #: the matched text (shortened), for logs and messages

    def message(self) -> str:
        """A refusal naming the category and what to do instead."""
        if self.category == "recalled_context":
            return (
                "Blocked (recalled_context): the content carries a <memory-context> tag or the "
                "recall note, i.e. text the memory system recalled for a turn. Recalled text is "
                "background, not a new fact: store only the fact itself, in your own words, "
                "without the tags."
            )
        if self.category == "invisible_unicode":
            return (
                f"Blocked ({self.category}): the content contains the invisible character "
                f"{self.pattern.removeprefix('invisible_unicode_')}, which can hide instructions. "
                "Remove it and retry."
            )
        return (
            f"Blocked ({self.category}): the content matches threat pattern '{self.pattern}' "
            f"({CATEGORIES[self.category]}) near {self.excerpt!r}. Memory entries are placed in "
            "the system prompt and must not contain injection, exfiltration or secret payloads; "
            "store the plain fact instead."
        )


def scan(text: str) -> ThreatFinding | None:
    """The first threat in ``text`` (invisible characters first), or ``None`` when clean."""
    invisible = _first_invisible(text)
    if invisible is not None:
        code = f"U+{ord(invisible):04X}"
        return ThreatFinding("invisible_unicode", f"invisible_unicode_{code}", code)
    if has_fence(text):
        return ThreatFinding("recalled_context", "memory_context_tag", "<memory-context>")
    # NFKC and the look-alike fold change nothing in ASCII text, the common case.
    normal = text if text.isascii() else fold(text)
    lowered = normal.lower()
    by_word, by_substring, substrings = _index()
    woken: set[int] = set()
    for word in _WORD.findall(lowered):
        hit = by_word.get(word)
        if hit is not None:
            woken.update(hit)
    for sub in substrings.findall(lowered):
        woken.update(by_substring[sub])
    compiled = _compiled()
    for i in sorted(woken):  # pattern order decides which of several findings is reported
        pattern = compiled[i]
        match = pattern.regex.search(normal)
        if match is not None:
            return _finding(pattern, match.group())
    return None


def _finding(pattern: _Pattern, matched: str) -> ThreatFinding:
    category = pattern.category
    excerpt = matched
    if category == "hardcoded_secret":
        excerpt = excerpt[:6] + "…"  # never echo a credential back into logs or tool results
    elif len(excerpt) > 60:
        excerpt = excerpt[:57] + "..."
    return ThreatFinding(category, pattern.pid, excerpt)


def describe() -> list[tuple[str, str, str]]:
    """(category, pattern id, description) for every pattern, for docs and ``--help``."""
    return [(p.category, p.pid, CATEGORIES[p.category]) for p in _compiled()]
