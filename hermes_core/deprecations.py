"""The plugin contract's deprecation path.

A form the previous release (0.1) documented keeps working for one more minor release: the kernel
still honours it, says so with a :class:`DeprecationWarning` naming the new form, and
``plugins list`` and ``doctor`` show the same line as a warning of the plugin. The forms:

==========================================  ================================================
0.1 form                                    0.2 form
==========================================  ================================================
platform sets ``self.url`` (an attribute)   override the ``url`` property
platform ``secret()``                       ``check_ready()``
platform ``listen_on`` alone                ``listens = True`` beside ``listen_on``
engine ``begin_turn()``                     the ``on_turn_start(session)`` hook
engine ``overhead_tokens`` attribute        the ``on_prompt_assembled(session, overhead_tokens)`` hook
engine ``last_report``                      ``CompressionResult.report`` (a dict)
==========================================  ================================================
"""

from __future__ import annotations

import types
import warnings
from typing import Any

__all__ = ["REMOVED_IN", "deprecated", "old_forms"]

#: the release that drops the old forms
REMOVED_IN = "0.3"

_PLATFORM = {
    "url": "{cls} sets self.url: override the `url` property instead "
           "(`@property def url(self) -> str | None`)",
    "secret": "{cls}.secret() is deprecated: rename it check_ready()",
    "listen_on": "{cls}.listen_on without `listens = True`: add the class attribute "
                 "`listens = True`",
}
_ENGINE = {
    "begin_turn": "{cls}.begin_turn() is deprecated: implement the on_turn_start(session) hook",
    "overhead_tokens": "{cls}.overhead_tokens is deprecated: implement the "
                       "on_prompt_assembled(session, overhead_tokens) hook",
    "last_report": "{cls}.last_report is deprecated: return the report as "
                   "CompressionResult(report=...) (a JSON-able dict)",
}


def _message(template: str, cls: type) -> str:
    return (template.format(cls=cls.__qualname__)
            + f" (the old form works until {REMOVED_IN}; docs/reference/)")


def deprecated(template: str, cls: type, *, stacklevel: int = 3) -> str:
    """Warn (DeprecationWarning) about one old form of ``cls``; return the message."""
    message = _message(template, cls)
    warnings.warn(message, DeprecationWarning, stacklevel=stacklevel)
    return message


def _stored_attributes(cls: type) -> set[str]:
    """Attribute names the methods defined on ``cls`` itself assign or read (``self.x``)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith("hermes_core.") or klass is object:
            continue
        for value in vars(klass).values():
            code = getattr(value, "__code__", None)
            stack = [code] if isinstance(code, types.CodeType) else []
            while stack:
                current = stack.pop()
                names.update(current.co_names)
                stack += [c for c in current.co_consts if isinstance(c, types.CodeType)]
    return names


def _defines(cls: type, attr: str) -> bool:
    return any(attr in vars(k) for k in cls.__mro__
               if not k.__module__.startswith("hermes_core.") and k is not object)


def old_forms(cls: Any, kind: str) -> list[str]:
    """The deprecation messages for the 0.1 forms ``cls`` (a registered class) still uses."""
    if not isinstance(cls, type):
        return []
    found: list[str] = []
    used = _stored_attributes(cls)
    if kind == "platform":
        if "url" in used and not _defines(cls, "url"):
            found.append(_PLATFORM["url"])
        if _defines(cls, "secret") and not _defines(cls, "check_ready"):
            found.append(_PLATFORM["secret"])
        if _defines(cls, "listen_on") and not getattr(cls, "listens", False):
            found.append(_PLATFORM["listen_on"])
    elif kind == "context-engine":
        if _defines(cls, "begin_turn") and not hasattr(cls, "on_turn_start"):
            found.append(_ENGINE["begin_turn"])
        if (_defines(cls, "overhead_tokens") or "overhead_tokens" in used) and not hasattr(
                cls, "on_prompt_assembled"):
            found.append(_ENGINE["overhead_tokens"])
        if "last_report" in used and not any(
                k.__module__ == "hermes_core.compaction.policy" for k in cls.__mro__):
            found.append(_ENGINE["last_report"])
    return [_message(t, cls) for t in found]


# ------------------------------------------------------------------ the old forms, still honoured

def platform_listens(platform: Any) -> bool:
    """Whether ``serve --host/--port`` apply: ``listens``, or (0.1) a ``listen_on`` of its own."""
    cls = type(platform)
    if getattr(cls, "listens", False):
        return True
    if _defines(cls, "listen_on") and callable(getattr(platform, "listen_on", None)):
        deprecated(_PLATFORM["listen_on"], cls)
        return True
    return False


def check_platform_ready(platform: Any) -> None:
    """``check_ready()``, or (0.1) ``secret()`` when the adapter has only that."""
    cls = type(platform)
    if _defines(cls, "secret") and not _defines(cls, "check_ready"):
        deprecated(_PLATFORM["secret"], cls)
        platform.secret()
        return
    check = getattr(platform, "check_ready", None)
    if callable(check):
        check()


def set_legacy_url(platform: Any, value: object) -> None:
    """``self.url = ...`` on a :class:`~hermes_core.kinds.Platform` (the 0.1 form)."""
    deprecated(_PLATFORM["url"], type(platform), stacklevel=4)
    platform.__dict__["_legacy_url"] = value


def engine_turn_start(engine: Any) -> None:
    """Call (0.1) ``begin_turn()`` on an engine without the ``on_turn_start`` hook."""
    if engine is None or hasattr(engine, "on_turn_start"):
        return
    begin = getattr(engine, "begin_turn", None)
    if callable(begin):
        deprecated(_ENGINE["begin_turn"], type(engine))
        begin()


def engine_overhead(engine: Any, tokens: int) -> None:
    """Set (0.1) ``overhead_tokens`` on an engine without the ``on_prompt_assembled`` hook."""
    if engine is None or hasattr(engine, "on_prompt_assembled"):
        return
    if hasattr(engine, "overhead_tokens"):
        deprecated(_ENGINE["overhead_tokens"], type(engine))
        engine.overhead_tokens = tokens


def engine_last_report(engine: Any) -> dict[str, Any] | None:
    """(0.1) an engine's ``last_report`` (a dataclass or a dict) when its ``compress`` returned
    no ``CompressionResult.report``: still copied into the compaction record, with a warning."""
    import dataclasses

    report = getattr(engine, "last_report", None)
    if report is None:
        return None
    deprecated(_ENGINE["last_report"], type(engine))
    if dataclasses.is_dataclass(report) and not isinstance(report, type):
        return dataclasses.asdict(report)
    return dict(report) if isinstance(report, dict) else None
