"""Optional per-session summaries of search results, by the auxiliary model client.

Bounded on every side: at most ``concurrency`` requests in flight, one overall deadline for the
whole batch, which also bounds each call, its retries included. A session whose summary fails,
times out or comes back empty keeps its raw excerpt; so does every session when no key or model is
configured. The fallback is the normal result, never an error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from hermes_core.llm import ChatLLM, LLMError, LLMFailure
from hermes_core.types import Message

__all__ = ["SYSTEM_PROMPT", "summarise_results"]

log = logging.getLogger("hermes_core.plugins.session_archive")

SYSTEM_PROMPT = (
    "You condense excerpts of an AI agent's past conversations. The agent searched its history "
    "and will read your summary instead of the excerpt. Keep what bears on the search query: "
    "decisions, facts, names, commands, file paths, numbers and outcomes. Write plain prose, at "
    "most about 150 words. If the excerpt has nothing relevant, say so in one sentence."
)


def _transcript(result: dict[str, Any], limit: int = 60_000) -> str:
    lines: list[str] = []
    for m in result.get("window", {}).get("messages", []):
        text = m.get("content") or ""
        if m.get("tool_calls"):
            text += " " + " ".join(f"[calls {c.get('name')}({c.get('arguments')})]"
                                   for c in m["tool_calls"])
        lines.append(f"{m.get('role')}: {text}")
    return "\n".join(lines)[:limit]


def _one(client: ChatLLM, query: str, result: dict[str, Any], max_tokens: int,
         timeout: float) -> str:
    title = result.get("title") or "untitled"
    prompt = (
        f"Search query: {query}\n\nExcerpt of the session \"{title}\" "
        f"({result.get('started_at', '')}):\n\n{_transcript(result)}"
    )
    return client.complete(system=SYSTEM_PROMPT, messages=[Message(role="user", content=prompt)],
                           max_tokens=max_tokens, timeout=timeout).strip()


def summarise_results(
    results: Sequence[dict[str, Any]],
    query: str,
    client: ChatLLM | None,
    *,
    timeout: float = 30.0,
    concurrency: int = 3,
    max_tokens: int = 600,
) -> str | None:
    """Put a ``summary`` on each result that got one (its ``window`` is then dropped), asking
    ``client`` (the auxiliary model client, which knows its model); ``None``: no client.

    Returns a note for the caller when some or all summaries are missing, else None.
    """
    if not results:
        return None
    if client is None:
        return "summaries are off: no model client is configured, so excerpts are shown"
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="archive-summary")
    started = time.monotonic()
    futures = {pool.submit(_one, client, query, r, max_tokens, timeout): r for r in results}
    done, pending = wait(futures, timeout=timeout)
    pool.shutdown(wait=False, cancel_futures=True)
    errors: list[str] = []
    unconfigured: list[str] = []
    # a call's own deadline (the same bound) and the batch's are one event, whichever came first
    timed_out = len(pending)
    for future in done:
        result = futures[future]
        try:
            result["summary"] = future.result()
            result.pop("window", None)
        except LLMError as exc:  # this session keeps its excerpt
            if exc.failure is LLMFailure.TIMEOUT:
                timed_out += 1
            else:
                (unconfigured if exc.failure is LLMFailure.NOT_CONFIGURED else errors).append(
                    str(exc)[:200])
        except Exception as exc:  # any failure: this session keeps its excerpt
            errors.append(f"{type(exc).__name__}: {exc}"[:200])
    if timed_out:
        errors.insert(0, f"{timed_out} timed out after {time.monotonic() - started:.1f}s")
    if unconfigured and not errors:
        return f"summaries are off: {unconfigured[0]}; so excerpts are shown"
    errors += unconfigured
    failures = len(results) - sum("summary" in r for r in results)
    if failures:
        log.warning("session summaries incomplete: %s", "; ".join(errors))
        return (f"{failures} of {len(results)} summaries failed ({errors[0]}); "
                "those sessions show excerpts")
    return None
