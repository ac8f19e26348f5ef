"""``hermes-core replay FILE.jsonl``: run a recorded conversation through the plugins, offline."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import click

from hermes_core.commands import echo_json

__all__ = ["replay"]

_WIDTH = 96


def _short(text: str | None, limit: int = 80) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _scratch_home(real: Path) -> Path:
    """A throwaway home holding the real home's config, SOUL.md and plugins (linked)."""
    scratch = Path(tempfile.mkdtemp(prefix="hermes-core-replay-"))
    for name in ("config.yaml", "SOUL.md"):
        if (real / name).is_file():
            shutil.copy2(real / name, scratch / name)
    if (real / "plugins").is_dir():
        (scratch / "plugins").symlink_to(real / "plugins", target_is_directory=True)
    return scratch


def _print_turn(t: dict[str, Any]) -> None:
    head = f"turn {t['turn']} (line {t['line']})  session {t['session_id']}"
    if t["new_session"]:
        head += "  [new session]"
    click.echo(click.style(head, bold=True))
    click.echo(f"  user      {_short(t['user'])}")
    if t["prefetch"]:
        parts = [f"{p['provider']} {p['status']} {p['chars']} chars" for p in t["prefetch"]]
        click.echo(f"  prefetch  {'; '.join(parts)}")
    else:
        click.echo("  prefetch  (no active provider implements prefetch)")
    for c in t["tool_calls"]:
        state = "ok" if c["ok"] else click.style("error", fg="red")
        args = _short(", ".join(f"{k}={v!r}" for k, v in c["arguments"].items()), 50)
        click.echo(f"  tool      {c['name']}({args}) -> {state} [{c['plugin'] or 'no plugin'}] "
                   f"{c['ms']:.1f} ms: {_short(c['result'], 50)}")
    for w in t["memory_writes"]:
        click.echo(f"  write     {w['provider']} {w['action']} {w['target']}: {_short(w['content'], 60)}")
    for c in t["compactions"]:
        click.echo(click.style(
            f"  compact   {c['messages_before']} -> {c['messages_after']} messages, ~{c['tokens_before']:,}"
            f" -> ~{c['tokens_after']:,} tokens ({c['engine']}); session {c['old_session_id']} -> "
            f"{c['new_session_id']}", fg="cyan"))
        for notice in c["notices"]:
            click.echo(f"            {_short(notice, _WIDTH)}")
    tokens = t["tokens"]
    click.echo(f"  tokens    prompt {tokens['prompt_first_call']:,} -> {tokens['prompt_last_call']:,}"
               f" over {t['llm_calls']} call(s)")
    sp = t["system_prompt"]
    if not sp["stable"]:
        verdict = click.style(f"CHANGED {sp['changes']}x without a rebuild", fg="red")
    elif sp["rebuilds"]:
        verdict = f"rebuilt {sp['rebuilds']}x ({'new bytes' if sp['changes'] else 'same bytes'})"
    else:
        verdict = "identical"
    click.echo(f"  system    {verdict} (sha256 {sp['sha256']})")
    click.echo(f"  reply     {_short(t['reply'])}")
    for line in t["log"]:
        click.echo(click.style(f"  log       {_short(line, _WIDTH)}", fg="yellow"))
    logged = "\n".join(t["log"])
    for problem in t["hook_problems"]:
        if problem["message"] not in logged:  # background problems arrive after their turn's log
            click.echo(click.style(f"  plugin    {_short(problem['message'], _WIDTH)}", fg="yellow"))


def _warn_window(host: Any) -> None:
    """Warn (stderr) when the configured model's context window is unknown: compaction in the
    replay would fire at the wrong point."""
    from hermes_core.models import window_warning

    try:
        client = host.llm("main")
    except Exception:  # an unknown llm.client: replay answers from the file anyway
        client = None
    warning = window_warning(host.config.core, client=client)
    if warning:
        click.echo(f"warning: {warning}", err=True)


@click.command("replay")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the whole report as JSON.")
@click.option("--provider", "providers", multiple=True, metavar="NAME",
              help="Use these memory providers instead of memory.providers (repeatable).")
@click.option("--in-place", is_flag=True,
              help="Write memories and the archive in your real home instead of a scratch copy.")
@click.option("--keep-home", is_flag=True, help="Keep the scratch home and print its path.")
@click.option("--use-key", is_flag=True,
              help="Let plugins that call the LLM themselves (an engine's summariser) use your "
                   "API key. Off by default: a replay spends no tokens.")
def replay(file: Path, as_json: bool, providers: tuple[str, ...], in_place: bool, keep_home: bool,
           use_key: bool) -> None:
    """Replay a recorded conversation (JSONL) through the configured plugins, with no API key.

    The assistant's words come from FILE; memory providers, the context engine and tools are the
    real plugins. Prints, per turn, what each plugin did. The format is in docs/agent-loop.md.
    """
    from hermes_core.config import load_copied_config
    from hermes_core.paths import home_dir
    from hermes_core.replay import build_host, load_transcript
    from hermes_core.replay import replay as run

    transcript = load_transcript(file)  # a bad file fails before anything is created
    real = home_dir()
    home = real if in_place else _scratch_home(real)
    try:
        config = load_copied_config(home, real)
        host = build_host(config, home, providers=list(providers) if providers else None,
                          keep_key=use_key)
        printer = None if as_json else _print_turn
        _warn_window(host)
        report = run(transcript, host, on_turn=printer)
    finally:
        if not in_place and not keep_home:
            shutil.rmtree(home, ignore_errors=True)
    if as_json:
        echo_json(report.as_dict())
        if report.summary.get("write_failures"):
            raise SystemExit(1)
        return
    s = report.summary
    click.echo("")
    click.echo(click.style("summary", bold=True))
    click.echo(f"  stack     providers: {', '.join(report.providers) or 'none'}; engine: "
               f"{report.engine or 'none'}; tools: {', '.join(report.tools) or 'none'}")
    click.echo(f"  model     {report.model} (window {report.context_window:,} tokens)")
    click.echo(f"  turns     {s['turns']} in {s['sessions']} session(s), {s['llm_calls']} LLM calls, "
               f"{s['tool_calls']} tool calls ({s['tool_errors']} errors), {s['memory_writes']} "
               f"memory writes, {s['compactions']} compaction(s)")
    stable = "yes" if s["system_prompt_stable"] else click.style("NO", fg="red")
    click.echo(f"  prompt    byte-identical except at compactions and new sessions: {stable}")
    click.echo(f"  speed     {s['turns_per_second']} turns/s ({s['seconds']} s)")
    if s.get("write_failures"):
        click.echo(click.style(
            f"  stores    {s['write_failures']} write(s) of the conversation failed (see the log "
            "lines above); exit status 1", fg="red"))
    if s["hook_problems"]:
        click.echo(click.style(
            f"  plugins   {s['hook_problems']} hook problem(s) ({s['hooks_timed_out']} late); "
            "see the log lines above, or --json", fg="yellow"))
    recalled = sum(p["chars"] for t in report.turns for p in t["prefetch"])
    if not recalled:
        click.echo("  recall    no provider's prefetch added anything to a turn: prefetch is off in "
                   "the default config (the file memory reaches the model through the system "
                   "prompt instead); see docs/agent-loop.md")
    if in_place:
        click.echo(f"  home      {home} (written in place)")
    elif keep_home:
        click.echo(f"  home      {home} (kept)")
    else:
        click.echo(f"  home      a scratch copy of {real}, now deleted: `memory show` and `sessions "
                   "list` do not see this replay (--in-place writes there, --keep-home keeps it)")
    if s.get("write_failures"):
        raise SystemExit(1)
