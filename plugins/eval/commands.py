"""``hermes-core eval DATASET``: score the memory stack's recall on LongMemEval or LoCoMo."""

from __future__ import annotations

import difflib
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from hermes_core.commands import echo_json
from hermes_core.private import write_private_text

__all__ = ["eval_command"]


def _check_out(out: Path) -> None:
    """Refuse ``--out`` when its folder cannot be had: an existing part of the path is a file."""
    folder = out.parent
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    if not folder.is_dir():
        raise click.BadParameter(
            f"{folder} exists and is not a folder, so {out} cannot be written; give a path in a "
            "folder", param_hint="'--out'")


def _ks(text: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise click.BadParameter(f"{text!r}: give whole numbers separated by commas, e.g. 1,3,5,10",
                                 param_hint="--k") from None
    if not ks or ks[0] < 1:
        raise click.BadParameter("every k must be 1 or more", param_hint="--k")
    return ks


@click.command("eval")
@click.argument("dataset", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["auto", "longmemeval", "locomo"]), default="auto",
              show_default=True, help="The file's format.")
@click.option("--provider", "providers", multiple=True, metavar="NAME",
              help="Use these memory providers instead of memory.providers (repeatable).")
@click.option("--engine", metavar="NAME", help="Use this context engine instead of context.engine.")
@click.option("--k", "k_text", default="1,3,5,10", show_default=True, help="Cut-offs for @k metrics.")
@click.option("--limit", type=click.IntRange(min=1), help="Evaluate only the first N questions.")
@click.option("--tool", "tools", multiple=True, metavar="NAME",
              help="Search with these tools only (default: every provider tool taking just a query).")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="Config edit for each case's scratch home; {case} becomes the case id "
                   "(e.g. hindsight.bank=eval-{case}).")
@click.option("--deadline", type=click.FloatRange(min=0.1), default=30.0, show_default=True,
              help="Seconds each retrieval source (prefetch, a tool) may take.")
@click.option("--timeout", "case_timeout", type=click.FloatRange(min=1), default=900.0,
              show_default=True, help="Seconds one case (ingest and its questions) may take.")
@click.option("--settle", "settle_timeout", type=click.FloatRange(min=0), default=120.0,
              show_default=True,
              help="Seconds a provider may take to finish its own background work after ingest.")
@click.option("--scratch-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the scratch homes go (default: the system's temp folder; a tmpfs such as "
                   "/dev/shm avoids waiting on disk syncs).")
@click.option("--answer", is_flag=True,
              help="Also answer each question from the recalled context and judge it with the "
                   "benchmark's judge prompt (needs llm.api_key or llm.base_url).")
@click.option("--judge-model", metavar="MODEL", help="Model for the judge (default: llm.model).")
@click.option("--json", "as_json", is_flag=True, help="Print the whole report as JSON.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the JSON report to this file.")
@click.option("--keep-homes", is_flag=True, help="Keep each case's scratch home (paths in the report).")
def eval_command(dataset: Path, fmt: str, providers: tuple[str, ...], engine: str | None, k_text: str,
                 limit: int | None, tools: tuple[str, ...], settings: tuple[str, ...], deadline: float,
                 case_timeout: float, settle_timeout: float, scratch_dir: Path | None, answer: bool,
                 judge_model: str | None, as_json: bool,
                 out: Path | None, keep_homes: bool) -> None:
    """Score the memory stack's recall on a LongMemEval or LoCoMo file, offline.

    Each question's haystack is ingested through the configured plugins in a scratch home (the
    dataset's own assistant turns are the model's replies), then each provider's prefetch and
    search tools are asked the question. Prints recall@k, hit@k and NDCG@k of the evidence per
    question type. See docs/eval.md.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from hermes_core.paths import home_dir

    from .datasets import load_dataset
    from .report import build_report
    from .run import EvalOptions, run_eval
    from .stack import StackSpec

    ks = _ks(k_text)
    if out is not None:  # before the run, which may take hours: not after it
        _check_out(out)
    data = load_dataset(dataset, fmt)  # type: ignore[arg-type]
    real = home_dir()
    spec = StackSpec(real, providers=providers or None, engine=engine, settings=settings)
    if scratch_dir is not None:
        _make_scratch_dir(scratch_dir)
    chosen, chosen_engine = _check_stack(spec, tools, scratch_dir)
    llm, judge = _answer_models(real, judge_model) if answer else (None, None)
    total = len(data.questions) if limit is None else min(limit, len(data.questions))
    console = Console(file=sys.stderr)
    progress = Progress(TextColumn("eval"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[rate]} q/s"), TextColumn("failed {task.fields[failed]}"),
                        TimeRemainingColumn(), console=console, transient=True)
    state = {"failed": 0}
    with progress:
        task = progress.add_task("eval", total=total, rate="-", failed=0)

        def tick(record: dict[str, Any]) -> None:
            state["failed"] += 0 if record["ok"] else 1
            done = progress.tasks[0].completed + 1
            elapsed = progress.tasks[0].elapsed or 0.0
            progress.update(task, advance=1, failed=state["failed"],
                            rate=f"{done / elapsed:.2f}" if elapsed > 0 else "-")

        options = EvalOptions(ks=ks, limit=limit, deadline=deadline, case_timeout=case_timeout,
                              tools=list(tools) or None, llm=llm, judge_llm=judge,
                              keep_homes=keep_homes, on_question=tick, settle_timeout=settle_timeout,
                              scratch_root=scratch_dir)
        run = run_eval(data, spec, options)
    report = build_report(run, dataset=str(dataset), fmt=data.format, providers=chosen,
                          engine=chosen_engine, ks=ks, answered=answer)
    if keep_homes:
        report["homes"] = options.homes
    unwritten = _write_report(out, report) if out is not None else None
    if as_json:
        echo_json(report)
        if unwritten is not None:
            raise click.ClickException(unwritten)
        return
    from .report import tables

    screen = Console()
    if not screen.is_terminal:
        screen = Console(width=max(screen.width, 132))
    for table in tables(report):
        screen.print(table)
    overall = report["summary"]["overall"]
    ingest = report["ingest"]
    click.echo(f"{overall['questions']} questions: {overall['scored']} scored, {overall['failed']} "
               f"failed, {overall['no_evidence']} without evidence; ingest {ingest['turns']} turns "
               f"at {ingest['turns_per_second']} turns/s; {report['seconds']} s in all")
    if overall["units_found_by_text"]:
        click.echo(f"{overall['units_found_by_text']} of {overall['units_found']} evidence units found "
                   "were credited by text (items without a session id; see docs/eval.md)")
    for failure in report["failures"][:5]:
        click.echo(click.style(f"  failed {failure['id']}: {failure['reason']}", fg="yellow"))
    if unwritten is not None:
        raise click.ClickException(unwritten)
    if out is not None:
        click.echo(f"report written to {out}")


def _make_scratch_dir(scratch_dir: Path) -> None:
    """``--scratch-dir`` made (with its parents); a clear error when something is in the way."""
    try:
        scratch_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in scratch_dir.parents if p.exists()), None)
        why = (f"{blocker} exists and is not a folder" if blocker and not blocker.is_dir()
               else str(exc.strerror or exc))
        raise click.BadParameter(f"cannot create {scratch_dir}: {why}",
                                 param_hint="'--scratch-dir'") from None


def _check_stack(spec: Any, tools: tuple[str, ...], scratch_dir: Path | None
                 ) -> tuple[list[str], str | None]:
    """The stack built once in a scratch home (a bad config, an unknown provider or ``--tool``
    fails here, once, not in every case): its memory providers and context engine."""
    from .retrieve import search_tools

    check = Path(tempfile.mkdtemp(prefix="hermes-core-eval-check-", dir=scratch_dir))
    try:
        host = spec(check, "check")
        chosen = list(host.config.core.memory.providers)
        chosen_engine = host.config.core.context.engine
        offered: list[str] = []
        searched: list[str] = []
        try:
            if tools:  # a provider's tools exist once it is started: start the stack once here
                host.activate_memory_providers()
                offered, searched = sorted(host.tools()), sorted(search_tools(host))
        finally:
            host.shutdown()
    finally:
        shutil.rmtree(check, ignore_errors=True)
    unknown = [name for name in dict.fromkeys(tools) if name not in offered]
    if unknown:
        close = [m for name in unknown for m in difflib.get_close_matches(name, offered, n=1)]
        raise click.ClickException(
            f"--tool {', '.join(map(repr, unknown))}: no active plugin of this stack offers "
            f"{'it' if len(unknown) == 1 else 'them'}; nothing was run."
            + (f" Did you mean {', '.join(map(repr, close))}?" if close else "")
            + f" Tools of this stack: {', '.join(offered) or 'none'} (searched when no --tool is "
            f"given: {', '.join(searched) or 'none'})")
    return chosen, chosen_engine


def _answer_models(real: Path, judge_model: str | None) -> tuple[Any, Any]:
    """``--answer``'s model and judge, from the real home's config; a usage error without one."""
    from hermes_core.host import PluginHost
    from hermes_core.llm import build_llm

    loaded = PluginHost.load(real)
    try:
        core = loaded.config.core
        llm = build_llm(loaded.registries, core, "main", config=loaded.config, home=real)
        if getattr(llm, "api_key", "") is None and not core.llm.base_url:
            raise click.UsageError("--answer needs a model: set llm.api_key (ANTHROPIC_API_KEY) "
                                   "or llm.base_url, or choose another llm.client")
        judge = llm
        if judge_model:
            judge = build_llm(loaded.registries, core, "main", config=loaded.config, home=real)
            judge.model = judge_model
        return llm, judge
    finally:
        loaded.shutdown()


def _write_report(out: Path, report: dict[str, Any]) -> str | None:
    """Write the JSON report to ``out``, private (it quotes the questions, answers and recalled
    text); what went wrong, or None. The report is printed anyway: the run is not lost."""
    try:
        write_private_text(out, json.dumps(report, indent=2, ensure_ascii=False, default=str)
                           + "\n")
    except OSError as exc:
        return f"cannot write the report to {out}: {exc.strerror or exc} (it is printed above)"
    return None
