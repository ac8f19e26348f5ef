"""Checks of a plugin object's hook implementations against the specs, before it takes part.

pluggy's ``check_pending`` finds unknown hook names only for objects registered before it runs, and
never says what was meant. The kernel checks every module and every instance it registers:

* a marked method whose name is no hook: an error with "did you mean ``prefetch``?";
* an argument the spec lacks: an error naming it and the spec's signature;
* a hook the object's kind never receives (a module implementing ``compress``): an error naming the
  kind that does;
* an ``async def`` implementation: an error (the kernel would get a coroutine it never awaits);
* an unmarked method named exactly like a hook its kind receives: a warning (it will never be
  called; add ``@hookimpl``).
"""

from __future__ import annotations

import difflib
import inspect
from dataclasses import dataclass
from typing import Literal

import pluggy

from . import hookspecs
from .hooks import RECEIVERS

__all__ = ["HookCheck", "check_hooks", "spec_signature"]

SPEC_NAMES: tuple[str, ...] = tuple(hookspecs.__all__)


@dataclass(slots=True, frozen=True)
class HookCheck:
    severity: Literal["error", "warning"]
    message: str


def spec_signature(name: str) -> str:
    spec = getattr(hookspecs, name)
    params = ", ".join(inspect.signature(spec).parameters)
    return f"{name}({params})"


def _did_you_mean(name: str, choices: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f"; did you mean `{close[0]}`?" if close else ""


def check_hooks(obj: object, kind: str, pm: pluggy.PluginManager, *, label: str) -> list[HookCheck]:
    """Every problem of ``obj``'s hook implementations, as a ``kind`` named ``label``."""
    out: list[HookCheck] = []
    allowed = [name for name in SPEC_NAMES if kind in RECEIVERS.get(name, ())]
    for attr in sorted(dir(obj)):
        if attr.startswith("__"):
            continue
        try:
            opts = pm.parse_hookimpl_opts(obj, attr)
        except Exception:  # a property that raises is not a hook
            continue
        if opts is None:
            if attr in allowed and callable(inspect.getattr_static(obj, attr, None)):
                out.append(HookCheck("warning", (
                    f"{label}: method {attr}() is named like the {attr} hook but is not marked "
                    "@hookimpl, so the kernel never calls it; add @hookimpl (from hermes_core) or "
                    "rename it")))
            continue
        hook = opts.get("specname") or attr
        misplaced = _placement_problems(attr, hook, opts, kind, allowed, label)
        if misplaced is not None:  # nothing more to check
            out.extend(misplaced)
            continue
        out.extend(_shape_problems(obj, attr, hook, opts, label))
    return out


def _placement_problems(attr: str, hook: str, opts: pluggy.HookimplOpts, kind: str,
                        allowed: list[str], label: str) -> list[HookCheck] | None:
    """A marked implementation of no hook, or of a hook its kind never receives (an optional
    hook of a later version is skipped: no problem); None when it is in place."""
    if hook not in SPEC_NAMES:
        if opts.get("optionalhook"):
            return []
        return [HookCheck("error", (
            f"{label}: {attr}() is marked @hookimpl but {hook!r} is no hermes-core hook"
            f"{_did_you_mean(hook, allowed or list(SPEC_NAMES))} (the hooks are listed in "
            "hermes_core.hookspecs; mark it @hookimpl(optionalhook=True) if it is meant for "
            "a later version)"))]
    if kind not in RECEIVERS[hook]:
        receivers = " or ".join(sorted(RECEIVERS[hook]))
        return [HookCheck("error", (
            f"{label}: implements {hook}, which the kernel calls only on a {receivers}; "
            f"a {kind} never receives it. Move it to the class you register as a "
            f"{receivers}, or remove it"))]
    return None


def _shape_problems(obj: object, attr: str, hook: str, opts: pluggy.HookimplOpts,
                    label: str) -> list[HookCheck]:
    """What is wrong with an implementation's arguments and kind of function."""
    out: list[HookCheck] = []
    function = getattr(obj, attr)
    spec_args = set(inspect.signature(getattr(hookspecs, hook)).parameters)
    impl = pluggy.HookImpl(obj, label, function, opts)
    extra = [a for a in (*impl.argnames, *impl.kwargnames) if a not in spec_args]
    if extra:
        out.append(HookCheck("error", (
            f"{label}: {hook}() takes {', '.join(repr(a) for a in extra)}, which the spec "
            f"does not pass; its signature is {spec_signature(hook)} (take any subset of those "
            "names)")))
    if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
        out.append(HookCheck("error", (
            f"{label}: {hook}() is `async def`, but the kernel calls hooks as plain functions "
            "(each on a plugin thread, under a deadline) and would get a coroutine it never "
            f"awaits; make it a plain `def` (call an async client with asyncio.run, or use "
            "its synchronous API)")))
        return out
    is_gen = inspect.isgeneratorfunction(function)
    if (opts.get("wrapper") or opts.get("hookwrapper")) and not is_gen:
        out.append(HookCheck("error", (
            f"{label}: {hook}() is marked as a wrapper but is not a generator; a wrapper "
            "must `yield` exactly once")))
    return out
