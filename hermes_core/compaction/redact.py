"""Keeping secrets out of summaries.

Summaries outlive the turns they replace and are sent to a second model, so credentials that
appeared in a tool output must not be copied into them. The patterns cover common key formats and
``key=value`` assignments whose key names a secret; anything else is left as written.
"""

from __future__ import annotations

import re

__all__ = ["REDACTED", "holds_key", "redact"]

REDACTED = "[REDACTED]"

# Each pattern runs only when a cheap substring test says it could match: most text holds no
# credential, and a plain ``in`` scan is far faster than a regex with look-behinds.
_KEYS: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = (
    (("sk-",), re.compile(r"sk-(?:ant-)?[A-Za-z0-9_-]{16,}")),  # Anthropic / OpenAI style keys
    (
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(r"gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"),
    ),
    (("AKIA",), re.compile(r"AKIA[0-9A-Z]{16}")),  # AWS access key ids
    (("xox",), re.compile(r"xox[abposr]-[A-Za-z0-9-]{10,}")),  # Slack tokens
    (("earer ",), re.compile(r"(?<=[Bb]earer )[A-Za-z0-9._~+/-]{16,}=*")),  # bearer tokens
)
_GUARDED = (
    *_KEYS,
    (("://",), re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)")),  # user:password in URLs
)
#: words that make the value assigned after them a secret (searched case-insensitively)
_SECRET_WORDS = (
    "api_key", "api-key", "apikey", "access_key", "private_key", "secret", "token", "passw",
    "credential",
)
# What follows such a word in an assignment: the rest of the name, "=" or ":", and the value.
# Matching starts at each occurrence found by str.find, which is much faster than one
# case-insensitive regex over the whole text.
_AFTER_WORD = re.compile(r"[\w-]*(?:\s*[=:]\s*)['\"]?([^\s'\",;]{4,})")


def _redact_assignments(text: str) -> str:
    lowered = text.lower()
    spans: list[tuple[int, int]] = []
    for word in _SECRET_WORDS:
        pos = lowered.find(word)
        while pos >= 0:
            match = _AFTER_WORD.match(text, pos + len(word))
            if match is not None:
                spans.append(match.span(1))
            pos = lowered.find(word, pos + len(word))
    if not spans:
        return text
    out: list[str] = []
    last = 0
    for start, end in sorted(spans):
        if start < last:
            continue  # overlapping matches of two words: the first already covered it
        out.append(text[last:start])
        out.append(REDACTED)
        last = end
    out.append(text[last:])
    return "".join(out)


def redact(text: str) -> str:
    """``text`` with credential-looking values replaced by ``[REDACTED]``."""
    if not text:
        return text
    for needles, pattern in _GUARDED:
        if any(needle in text for needle in needles):
            text = pattern.sub(REDACTED, text)
    return _redact_assignments(text)


def holds_key(text: str) -> bool:
    """Whether ``text`` holds a credential of a known key format or a bearer token."""
    return any(any(n in text for n in needles) and pattern.search(text) is not None
               for needles, pattern in _KEYS)
