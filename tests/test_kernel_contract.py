"""The kernel contract: every hook call through host.hooks with pluggy's semantics, kind scoping,
isolation, deadlines, checked plugins. Throwaway plugins are defined inline."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import pytest
from agent_support import make_host
from click.testing import CliRunner

from hermes_core import MemoryProvider, hookimpl
from hermes_core.agent import Agent
from hermes_core.cli import cli
from hermes_core.errors import PluginError
from hermes_core.testing import CannedLLM
from hermes_core.types import Message, Session

SESSION = Session(id="s1", platform="test")


def _provider(name: str, log: list[str], **opts: bool) -> type[MemoryProvider]:
    @hookimpl(**opts)
    def on_message(self, message):
        log.append(name)

    return type(name.title(), (MemoryProvider,), {"name": name, "on_message": on_message})


def test_order_tryfirst_plain_trylast_and_a_wrapper_per_call(home: Path) -> None:
    log: list[str] = []

    class Wrap(MemoryProvider):
        name = "wrap"

        @hookimpl(wrapper=True)
        def on_message(self, message):
            log.append("wrapper-before")
            result = yield
            log.append("wrapper-after")
            return result

    host = make_host(home, providers=[_provider("last", log, trylast=True), _provider("plain", log),
                                      _provider("first", log, tryfirst=True), Wrap])
    for _ in range(2):
        host.hooks.on_message(message=Message("user", "hi"), session=SESSION)
    one = ["wrapper-before", "first", "plain", "last", "wrapper-after"]
    assert log == one + one


def test_trace_prints_every_implementation_call(home: Path, monkeypatch, capfd) -> None:
    monkeypatch.setenv("HERMES_CORE_TRACE_PLUGINS", "1")
    log: list[str] = []
    host = make_host(home, providers=[_provider("plain", log), _provider("other", log)])
    host.hooks.on_message(message=Message("user", "hi"), session=SESSION)
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("hermes-core trace: on_message")]
    assert [line.split()[3] for line in lines] == ["memory-provider:plain", "memory-provider:other"]
    assert all(line.endswith(" ok") and " ms " in line for line in lines)


def test_pluggy_monitoring_sees_the_kernels_calls(home: Path) -> None:
    seen: list[tuple[str, list[str]]] = []
    host = make_host(home, providers=[_provider("plain", [])])
    undo = host.pm.add_hookcall_monitoring(
        lambda name, impls, kwargs: seen.append((name, [i.plugin_name for i in impls])),
        lambda outcome, name, impls, kwargs: None)
    agent = Agent(host, CannedLLM())
    agent.run_turn("hello")
    agent.close()
    undo()
    # once for the user message, once for the reply: the kernel's own calls, through pluggy
    assert seen.count(("on_message", ["memory-provider:plain"])) == 2


def test_first_result_stops_at_the_first_answer(home: Path) -> None:
    called: list[str] = []

    def loader(name: str, answer: bool) -> type[MemoryProvider]:
        @hookimpl
        def load_session(self, platform, conversation_key, session_id):
            called.append(name)
            return (Session(id=name), []) if answer else None

        return type(name, (MemoryProvider,), {"name": name, "load_session": load_session})

    host = make_host(home, providers=[loader("silent", False), loader("first", True),
                                      loader("second", True)])
    value, outcomes = host.hooks.load_session(platform="t", conversation_key="k", session_id=None)
    assert value is not None and value[0].id == "first"
    assert called == ["silent", "first"]  # memory.providers order; "second" never ran
    assert [o.plugin for o in outcomes] == ["memory-provider:silent", "memory-provider:first"]


def test_engine_hooks_reach_only_the_engine(home: Path) -> None:
    class Sneaky(MemoryProvider):
        name = "sneaky"

        @hookimpl
        def should_compress(self, messages):
            return True

    host = make_host(home, providers=[Sneaky])  # refused, logged, the host goes on without it
    assert host.providers() == {}
    assert ("should_compress, which the kernel calls only on a context-engine"
            in (host.records["test_plugins"].error or ""))


def test_a_module_implementing_an_instance_hook_is_refused(home: Path) -> None:
    class Module:
        @hookimpl
        def compress(self, messages):
            return None

    host = make_host(home, extra_plugins=[("wrongkind", Module())], activate=False)
    error = host.records["wrongkind"].error or ""
    assert "compress" in error and "context-engine" in error


@pytest.mark.parametrize(("attr", "expect"), [
    ("prefech", "did you mean `prefetch`?"),
    ("should_compres", "did you mean"),
])
def test_a_misspelled_hook_names_the_closest(home: Path, attr: str, expect: str) -> None:
    def impl(self, query):
        return None

    cls = type("Typo", (MemoryProvider,), {"name": "typo", attr: hookimpl(impl)})
    host = make_host(home, providers=[cls], activate=False)
    with pytest.raises(PluginError, match=expect):
        host.activate("memory-provider", "typo", config_key="memory.providers[0]")
    assert expect in (host.records["test_plugins"].error or "")


def test_an_argument_the_spec_lacks_is_named_with_the_signature(home: Path) -> None:
    class Wrong(MemoryProvider):
        name = "wrong"

        @hookimpl
        def sync_turn(self, user_msg):
            return None

    host = make_host(home, providers=[Wrong], activate=False)
    with pytest.raises(PluginError, match=r"'user_msg'.*sync_turn\(user_message, assistant_message, "
                                           r"session, messages\)"):
        host.activate("memory-provider", "wrong", config_key="memory.providers[0]")


def test_an_async_hook_implementation_is_named_before_a_session(home: Path) -> None:
    class Eager(MemoryProvider):
        name = "eager"

        @hookimpl
        async def prefetch(self, query):
            return "never awaited"

    host = make_host(home, providers=[Eager], activate=False)
    errors, _warnings = host.dry_activation()
    assert any("prefetch() is `async def`" in e and "make it a plain `def`" in e for e in errors)
    with pytest.raises(PluginError, match=r"memory provider 'eager': prefetch\(\) is `async def`"):
        host.activate("memory-provider", "eager", config_key="memory.providers[0]")

    class AsyncModule:
        @hookimpl
        async def register_tools(self, register):
            return None

    host = make_host(home, extra_plugins=[("async_module", AsyncModule())], activate=False)
    assert "register_tools() is `async def`" in (host.records["async_module"].error or "")


def test_unmarked_hook_named_method_is_a_warning(home: Path) -> None:
    class Forgot(MemoryProvider):
        name = "forgot"

        def prefetch(self, query, session):
            return "never called"

    host = make_host(home, providers=[Forgot])
    assert any("prefetch" in w and "@hookimpl" in w for w in host.records["test_plugins"].warnings)


@pytest.mark.parametrize("kind", ["raises", "no-yield", "two-yields", "raises-after"])
def test_a_misbehaving_wrapper_is_named_and_the_call_goes_on(home: Path, kind: str, caplog) -> None:
    caplog.set_level(logging.ERROR, logger="hermes_core")
    log: list[str] = []

    def on_message(self, message):
        if kind == "raises":
            raise RuntimeError("before")
        if kind == "no-yield":
            return
            yield
        yield
        if kind == "two-yields":
            yield
        if kind == "raises-after":
            raise RuntimeError("after")

    Bad = type("Bad", (MemoryProvider,), {"name": "bad", "on_message": hookimpl(wrapper=True)(on_message)})
    host = make_host(home, providers=[_provider("plain", log), Bad])
    host.hooks.on_message(message=Message("user", "x"), session=SESSION)
    assert log == ["plain"]
    problem = host.hooks.problems[-1]
    assert problem.plugin == "memory-provider:bad" and problem.hook == "on_message"
    assert "wrapper" in problem.message and "yield exactly once" in problem.message


def test_wrong_return_type_is_named_and_ignored(home: Path) -> None:
    class Numbers(MemoryProvider):
        name = "numbers"

        @hookimpl
        def system_prompt_block(self, session):
            return 42

    host = make_host(home, providers=[Numbers])
    agent = Agent(host, CannedLLM())
    result = agent.run_turn("hi")
    agent.close()
    assert "42" not in agent.system_prompt
    assert [(p.plugin, p.hook, p.status) for p in result.problems] == [
        ("memory-provider:numbers", "system_prompt_block", "bad_return")]
    assert "return a str or None, not int" in result.problems[0].message


def test_a_refused_instance_whose_shutdown_hangs_does_not_hold_the_start(home: Path,
                                                                          caplog) -> None:
    """A provider refused for a hook mistake is shut down under the shutdown deadline: its hung
    ``shutdown`` is named and left on its thread, and the command goes on."""
    release = threading.Event()
    started = threading.Event()

    class Refused(MemoryProvider):
        name = "refused"

        @hookimpl
        def get_tools(self, session):  # the spec passes no session: refused
            return []

        @hookimpl
        def shutdown(self):
            started.set()
            release.wait(60)

    host = make_host(home, providers=[Refused], activate=False,
                     config_text="hooks:\n  timeouts:\n    shutdown: 0.2\n")
    outcome: list[BaseException] = []

    def activate() -> None:
        try:
            host.activate("memory-provider", "refused", config_key="memory.providers[0]")
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=activate, daemon=True)
    with caplog.at_level(logging.WARNING, logger="hermes_core"):
        worker.start()
        worker.join(30)  # a bound on a hang, not a speed check: the deadline is 0.2 s
        alive = worker.is_alive()
    release.set()
    assert not alive, "activation waited for the refused instance's hung shutdown"
    assert started.is_set()
    assert len(outcome) == 1 and isinstance(outcome[0], PluginError)
    assert "get_tools() takes 'session'" in str(outcome[0])
    assert any("memory provider 'refused'" in r.getMessage() and "shutdown of the refused instance did "
               "not return within 0.2 s" in r.getMessage() for r in caplog.records)


def test_a_hung_plugin_costs_one_deadline_and_its_writes_land_in_order(home: Path) -> None:
    release = threading.Event()
    seen: list[str] = []

    class Slow(MemoryProvider):
        name = "slow"

        @hookimpl
        def on_message(self, message):
            release.wait(10)
            seen.append(message.content)

    host = make_host(home, providers=[Slow],
                     config_text="hooks:\n  timeouts:\n    on_message: 0.2\n")
    agent = Agent(host, CannedLLM())
    first = agent.run_turn("one")
    second = agent.run_turn("two")
    statuses = [p.status for p in first.problems + second.problems if p.hook == "on_message"]
    # the first call waited its deadline; every later one was queued behind it without a wait
    assert statuses == ["timed_out", "queued", "queued", "queued"]
    release.set()
    agent.close()
    assert seen == ["one", first.reply, "two", second.reply]  # late, never lost or reordered


def test_a_hung_background_provider_does_not_starve_the_others(home: Path) -> None:
    release = threading.Event()
    stored: list[str] = []

    class Hung(MemoryProvider):
        name = "hung"

        @hookimpl
        def sync_turn(self):
            release.wait(10)

    class Good(MemoryProvider):
        name = "good"

        @hookimpl
        def sync_turn(self, user_message):
            stored.append(user_message.content)

        @hookimpl
        def on_session_end(self, session, reason):
            stored.append(f"end {reason}")

    host = make_host(home, providers=[Hung, Good],
                     config_text="hooks:\n  timeouts:\n    sync_turn: 0.2\n")
    agent = Agent(host, CannedLLM())
    for text in ("a", "b", "c"):
        agent.run_turn(text)
    assert agent.worker.flush(5)
    report = agent.close()
    release.set()
    assert stored == ["a", "b", "c", "end user_exit"]
    assert report.status in ("drained", "timed_out")


def test_health_commands_name_every_problem_and_strict_refuses_a_replay(home: Path, monkeypatch) -> None:
    plugin_dir = home / "plugins" / "oops"
    plugin_dir.mkdir(parents=True)
    (plugin_dir / "__init__.py").write_text(
        "from hermes_core import MemoryProvider, hookimpl\n"
        "class Typo(MemoryProvider):\n"
        "    name = 'typo'\n"
        "    @hookimpl\n"
        "    def prefech(self, query):\n"
        "        return None\n"
        "class Args(MemoryProvider):\n"
        "    name = 'args'\n"
        "    @hookimpl\n"
        "    def sync_turn(self, user_msg):\n"
        "        return None\n"
        "class Boom(MemoryProvider):\n"
        "    name = 'boom'\n"
        "    def __init__(self, config, context):\n"
        "        raise RuntimeError('cannot start')\n"
        "@hookimpl\n"
        "def register_memory_providers(register):\n"
        "    register(Typo); register(Args); register(Boom)\n")
    (home / "config.yaml").write_text("memory:\n  providers: [typo, args, boom]\n")
    monkeypatch.setenv("HERMES_CORE_HOME", str(home))
    runner = CliRunner()
    for args in (["doctor"], ["config", "validate"]):
        result = runner.invoke(cli, args)
        text = result.output + (result.stderr if result.stderr_bytes is not None else "")
        assert result.exit_code != 0, (args, text)
        assert "did you mean `prefetch`?" in text
        assert "'user_msg'" in text
        assert "cannot start" in text
    monkeypatch.setenv("HERMES_CORE_STRICT_PLUGINS", "1")
    transcript = Path(__file__).resolve().parents[1] / "examples" / "first-week.jsonl"
    result = runner.invoke(cli, ["replay", str(transcript)])
    assert result.exit_code != 0
    assert "plugin 'oops'" in result.output  # strict: the first problem stops the replay, named


def test_slow_provider_in_every_turn_hook_replay_keeps_every_message(home: Path) -> None:
    """A provider slow in on_message, system_prompt_block, prefetch and sync_turn: the replay ends,
    each hook records it as late, and the archive holds every message (bench/bench_slow_plugin.py
    times the 5-second version against the 30-second target)."""
    from hermes_core.config import load_config
    from hermes_core.replay import build_host, load_transcript, replay

    release = threading.Event()

    class Sleepy(MemoryProvider):
        name = "sleepy"

        @hookimpl
        def on_message(self, message):
            release.wait(1.0)

        @hookimpl
        def system_prompt_block(self, session):
            release.wait(1.0)
            return "late"

        @hookimpl
        def prefetch(self, query):
            release.wait(1.0)

        @hookimpl
        def sync_turn(self):
            release.wait(1.0)

    class Registrar:
        @hookimpl
        def register_memory_providers(self, register):
            register(Sleepy)

    (home / "config.yaml").write_text(
        "memory:\n  providers: [sleepy, session_archive]\n  worker_drain_timeout: 1\n"
        "hooks:\n  timeouts: {on_message: 0.1, system_prompt_block: 0.1, sync_turn: 0.1}\n")
    transcript = load_transcript(Path(__file__).resolve().parents[1] / "examples" / "first-week.jsonl")
    host = build_host(load_config(home), home)
    host.register_plugin("sleepy_plugin", Registrar())
    start = time.perf_counter()
    report = replay(transcript, host)
    release.set()
    assert report.summary["turns"] == len(transcript.turns)
    late = {p.hook for p in host.hooks.problems if p.status in ("timed_out", "queued")}
    assert {"on_message", "system_prompt_block", "sync_turn"} <= late
    import sqlite3

    with sqlite3.connect(home / "state.db") as db:
        stored = [r[0] for r in db.execute("SELECT content FROM messages WHERE role = 'user'")]
    assert stored == [t.user for t in transcript.turns]
    assert time.perf_counter() - start < 120  # a guard against a hang, not a speed target
    json.dumps(report.as_dict())


def test_hook_register_commands(home: Path, monkeypatch) -> None:
    """A directory plugin's command: listed by --help, run by name, gone when disabled."""
    plugin_dir = home / "plugins" / "cmdprobe"
    plugin_dir.mkdir(parents=True)
    (plugin_dir / "__init__.py").write_text(
        "import click\n"
        "from hermes_core import hookimpl\n"
        "@click.command('cmdprobe-hello')\n"
        "@click.argument('name')\n"
        "def hello(name):\n"
        "    '''Say hello to NAME.'''\n"
        "    click.echo(f'hello {name}')\n"
        "@hookimpl\n"
        "def register_commands(register):\n"
        "    register(hello)\n")
    monkeypatch.setenv("HERMES_CORE_HOME", str(home))
    runner = CliRunner()
    run = runner.invoke(cli, ["cmdprobe-hello", "world"])
    assert run.exit_code == 0 and run.output == "hello world\n"
    listed = runner.invoke(cli, ["--help"])
    assert "cmdprobe-hello" in listed.output and "Say hello to NAME." in listed.output
    assert runner.invoke(cli, ["plugins", "disable", "cmdprobe"]).exit_code == 0
    assert "cmdprobe-hello" not in runner.invoke(cli, ["--help"]).output
    gone = runner.invoke(cli, ["cmdprobe-hello", "world"])
    assert gone.exit_code != 0
    assert "provided by the plugin 'cmdprobe', which is disabled" in gone.output
    assert "hermes-core plugins enable cmdprobe" in gone.output


@pytest.mark.parametrize(("body", "expect"), [
    ("register('not a command')", "register a click.Command"),
    ("register(click.command('plugins')(lambda: None))", "the kernel's own"),
])
def test_bad_command_registrations_are_named(home: Path, body: str, expect: str) -> None:
    class Bad:
        @hookimpl
        def register_commands(self, register):
            exec(body, {"click": __import__("click"), "register": register})

    host = make_host(home, extra_plugins=[("badcmd", Bad())], activate=False)
    assert expect in (host.records["badcmd"].error or "")


def test_two_plugins_one_command_name_names_both(home: Path) -> None:
    import click

    def offering(text: str) -> object:
        class Offer:
            @hookimpl
            def register_commands(self, register):
                register(click.command("dup")(lambda: click.echo(text)))

        return Offer()

    host = make_host(home, extra_plugins=[("first_p", offering("a")), ("second_p", offering("b"))],
                     activate=False)
    assert host.commands["dup"][1] == "first_p"
    error = host.records["second_p"].error or ""
    assert "'first_p'" in error and "'second_p'" in error


def test_with_file_memory_disabled_memory_names_it(home: Path, monkeypatch) -> None:
    monkeypatch.setenv("HERMES_CORE_HOME", str(home))
    runner = CliRunner()
    assert runner.invoke(cli, ["memory", "show"]).exit_code == 0  # the index learns who owns it
    assert runner.invoke(cli, ["plugins", "disable", "file_memory"]).exit_code == 0
    result = runner.invoke(cli, ["memory", "show"])
    assert result.exit_code != 0 and "file_memory" in result.output


def test_a_reported_problem_reaches_doctor_and_plugins_list(home: Path, monkeypatch) -> None:
    plugin_dir = home / "plugins" / "flaky"
    plugin_dir.mkdir(parents=True)
    (plugin_dir / "__init__.py").write_text(
        "from hermes_core import MemoryProvider, hookimpl\n"
        "class Flaky(MemoryProvider):\n"
        "    name = 'flaky'\n"
        "    @hookimpl\n"
        "    def get_tools(self):\n"
        "        self.context.report_problem('server notes-db did not start: connection refused')\n"
        "        return []\n"
        "@hookimpl\n"
        "def register_memory_providers(register):\n"
        "    register(Flaky)\n")
    (home / "config.yaml").write_text("memory:\n  providers: [flaky]\n")
    monkeypatch.setenv("HERMES_CORE_HOME", str(home))
    result = CliRunner().invoke(cli, ["doctor", "--json"])
    checks = {c["name"]: c for c in json.loads(result.output)}
    assert checks["activation"]["ok"] and checks["activation"]["warning"]
    assert "server notes-db did not start" in checks["activation"]["detail"]


def test_notices_between_turns_reach_the_platform_through_send(home: Path) -> None:
    """The dispatcher delivers an agent-initiated message through the platform's send hook."""
    from hermes_core.dispatch import connect_platform, disconnect_platform
    from hermes_core.kinds import Platform

    delivered: list[tuple[str, str]] = []

    class Pager(Platform):
        name = "pager"

        def can_send(self) -> bool:
            return True

        @hookimpl
        def connect(self, dispatcher):
            return None

        @hookimpl
        def send(self, conversation_key, text):
            delivered.append((conversation_key, text))

    class Registrar:
        @hookimpl
        def register_platforms(self, register):
            register(Pager)

    from hermes_core import ContextEngine

    class Still(ContextEngine):
        name = "still"

        @hookimpl
        def should_compress(self):
            return False

    host = make_host(home, engine=Still, activate=False,
                     extra_plugins=[("pager_plugin", Registrar())])
    instance, dispatcher = connect_platform(host, "pager", llm=CannedLLM())
    try:
        agent = dispatcher.call("pager", "alice", lambda a: a)
        assert agent.on_notice is not None
        agent.on_notice("memory updated: prefers tea")
        assert delivered == [("alice", "memory updated: prefers tea")]
        assert dispatcher.send("bob", "hello") is True
        assert delivered[-1] == ("bob", "hello")
    finally:
        disconnect_platform(host, instance, dispatcher)


def test_a_failed_store_write_is_a_notice_and_fails_the_replay(home: Path, monkeypatch) -> None:
    plugin_dir = home / "plugins" / "fullstore"
    plugin_dir.mkdir(parents=True)
    (plugin_dir / "__init__.py").write_text(
        "from hermes_core import MemoryProvider, hookimpl\n"
        "class Full(MemoryProvider):\n"
        "    name = 'full'\n"
        "    @hookimpl\n"
        "    def on_message(self, message):\n"
        "        raise OSError('disk full: the message was kept in the spool')\n"
        "@hookimpl\n"
        "def register_memory_providers(register):\n"
        "    register(Full)\n")
    (home / "config.yaml").write_text("memory:\n  providers: [full]\n")
    monkeypatch.setenv("HERMES_CORE_HOME", str(home))
    transcript = Path(__file__).resolve().parents[1] / "examples" / "first-week.jsonl"
    result = CliRunner().invoke(cli, ["replay", str(transcript), "--json"])
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["summary"]["write_failures"] >= 2
    first = report["turns"][0]
    assert any("disk full" in p["message"] for p in first["hook_problems"])
    assert any("could not store this conversation" in n for n in first["notices"])
