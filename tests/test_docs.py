"""Meta-tests: every hook is documented with its exact signature and tested; doc examples run."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from hermes_core import hookspecs

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference"
PAGES = sorted(REFERENCE.glob("*.md"))
GROUPS = ("REGISTRY_HOOKS", "MEMORY_HOOKS", "CONTEXT_ENGINE_HOOKS", "TOOL_HOOKS", "PLATFORM_HOOKS",
          "MODULE_HOOKS")
ALL_HOOKS = [name for group in GROUPS for name in getattr(hookspecs, group)]


def signature(name: str) -> str:
    sig = inspect.signature(getattr(hookspecs, name))
    params = ", ".join(f"{p.name}: {p.annotation}" for p in sig.parameters.values())
    return f"{name}({params}) -> {sig.return_annotation}"


def test_every_hookspec_is_in_a_group():
    specs = {n for n, f in vars(hookspecs).items() if hasattr(f, "hermes_core_spec")}
    assert specs == set(ALL_HOOKS)
    assert len(ALL_HOOKS) == len(set(ALL_HOOKS))
    assert set(hookspecs.__all__) == specs


@pytest.mark.parametrize("name", ALL_HOOKS)
def test_hook_has_docstring(name):
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    assert len(doc) > 60, f"hookspec {name} needs a docstring: when, with what, what it returns"


@pytest.mark.parametrize("name", ALL_HOOKS)
def test_hook_is_documented_with_its_signature(name):
    heading = f"### `{signature(name)}`"
    found = [p.name for p in PAGES if heading in p.read_text(encoding="utf-8").splitlines()]
    assert found, f"no section '{heading}' in docs/reference/*.md"


@pytest.mark.parametrize("name", ALL_HOOKS)
def test_hook_is_tested(name):
    pattern = re.compile(rf"^def test_hook_{name}\(", re.MULTILINE)
    assert any(pattern.search(p.read_text(encoding="utf-8"))
               for p in Path(__file__).parent.rglob("test_*.py")), f"no test_hook_{name}"


def _python_blocks():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for i, match in enumerate(re.finditer(r"```python\n(.*?)```", text, re.DOTALL)):
            yield pytest.param(match.group(1), id=f"{page.stem}-{i}")


@pytest.mark.parametrize("source", list(_python_blocks()))
def test_reference_examples_run(source):
    exec(compile(source, "<docs example>", "exec"), {"__name__": "docs_example"})


# ------------------------------------------------------------------ commands named in the docs

#: commands that come with a distribution of their own (not installed with the kernel)
_OTHER_DISTRIBUTIONS = {"import": "hermes-core-hermes-compat", "hermes": "hermes-core-hermes-compat",
                        "honcho": "hermes-core-honcho",
                        "hindsight": "hermes-core-hindsight"}
_COMMAND = re.compile(r"(?:^|[\s(`$/])hermes-core((?:\s+[a-z][a-z0-9-]*(?![\w:-]))+)")


def _command_lines(text: str) -> list[str]:
    """The lines of code that may run ``hermes-core``: inline spans, and lines of blocks without
    their comments (in a block with ``$ `` prompts, only the prompt lines: the rest is output)."""
    lines = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.DOTALL))
    for block in re.findall(r"```[^\n]*\n(.*?)```", text, re.DOTALL):
        rows = block.splitlines()
        if any(r.startswith("$ ") for r in rows):
            rows = [r for r in rows if r.startswith("$ ")]
        lines += [r.split(" #", 1)[0] for r in rows]
    return lines


def _named_commands() -> dict[tuple[str, ...], str]:
    """Each ``hermes-core WORD [WORD]`` in code (blocks and spans) of README.md and docs/,
    with the first page naming it."""
    found: dict[tuple[str, ...], str] = {}
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for line in _command_lines(text):
            for match in _COMMAND.finditer(line):
                words = tuple(match.group(1).split()[:2])
                found.setdefault(words, str(page.relative_to(ROOT)))
        for group, sub in re.findall(r"`([a-z]+) ([a-z][a-z-]+)`", text):  # `memory history`
            found.setdefault(("?" + group, sub), str(page.relative_to(ROOT)))
    return found


def test_every_command_named_in_the_docs_exists(home):
    import click

    from hermes_core.cli import cli

    missing = []
    with click.Context(cli) as ctx:
        for words, page in sorted(_named_commands().items()):
            if words[0].lstrip("?") in _OTHER_DISTRIBUTIONS:
                continue
            command = cli.get_command(ctx, words[0].lstrip("?"))
            if words[0].startswith("?") and not isinstance(command, click.Group):
                continue  # `word word` that does not start with a command group: not a command
            if command is None:
                missing.append(f"{' '.join(words[:1])} ({page})")
            elif (isinstance(command, click.Group) and len(words) > 1
                  and command.get_command(ctx, words[1]) is None):
                missing.append(f"{' '.join(words).lstrip('?')} ({page})")
    assert len(_named_commands()) > 40  # the scan finds the docs' commands at all
    assert not missing, "commands named in the docs that do not exist: " + "; ".join(missing)
