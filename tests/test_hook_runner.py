"""One hand-off per hook call: several implementations run on one runner thread over claimed
lanes, and the caller takes over when one of them is late. Throwaway plugins are defined inline."""

from __future__ import annotations

import threading
from pathlib import Path

from agent_support import make_host

from hermes_core import MemoryProvider, hookimpl
from hermes_core.types import Message, Session

SESSION = Session(id="s1", platform="test")


def _statuses(outcomes) -> dict[str, str]:
    return {o.plugin.split(":", 1)[1]: o.status for o in outcomes}


def test_a_late_implementation_is_taken_over_and_the_rest_still_run_in_order(home: Path) -> None:
    release = threading.Event()
    order: list[str] = []
    hung: list[str] = []

    class First(MemoryProvider):
        name = "first"

        @hookimpl(tryfirst=True)
        def on_message(self, message):
            order.append(f"first {message.content}")

    class Hung(MemoryProvider):
        name = "hung"

        @hookimpl
        def on_message(self, message):
            release.wait(10)
            hung.append(message.content)

    class Last(MemoryProvider):
        name = "last"

        @hookimpl(trylast=True)
        def on_message(self, message):
            order.append(f"last {message.content}")

    host = make_host(home, providers=[First, Hung, Last],
                     config_text="hooks:\n  timeouts:\n    on_message: 0.2\n")
    one = host.hooks.on_message(message=Message("user", "one"), session=SESSION)
    two = host.hooks.on_message(message=Message("user", "two"), session=SESSION)
    assert [o.plugin.split(":", 1)[1] for o in one] == ["first", "hung", "last"]
    assert _statuses(one) == {"first": "ok", "hung": "timed_out", "last": "ok"}
    # the hung plugin's lane is late and busy: its next call is queued, the others run at once
    assert _statuses(two) == {"first": "ok", "hung": "queued", "last": "ok"}
    assert order == ["first one", "last one", "first two", "last two"]
    release.set()
    assert host.hooks.drain(5) == []
    assert hung == ["one", "two"]  # late, never lost or reordered
    problems = [(p.plugin, p.status) for p in host.hooks.problems]
    assert problems == [("memory-provider:hung", "timed_out"), ("memory-provider:hung", "queued")]
    host.hooks.close()


def test_each_plugin_sees_one_call_at_a_time_from_concurrent_callers(home: Path) -> None:
    lock = threading.Lock()
    running: dict[str, int] = {}
    most: dict[str, int] = {}
    calls: dict[str, int] = {}
    overlap = threading.Event()

    def provider(name: str) -> type[MemoryProvider]:
        @hookimpl
        def on_message(self, message):
            with lock:
                running[name] = running.get(name, 0) + 1
                most[name] = max(most.get(name, 0), running[name])
                calls[name] = calls.get(name, 0) + 1
            overlap.wait(0.001)  # widen the window in which a second call could overlap
            with lock:
                running[name] -= 1

        return type(name.title(), (MemoryProvider,), {"name": name, "on_message": on_message})

    host = make_host(home, providers=[provider("a"), provider("b"), provider("c")])
    errors: list[str] = []

    def caller(n: int) -> None:
        for i in range(40):
            for outcome in host.hooks.on_message(message=Message("user", f"{n}-{i}"),
                                                 session=SESSION):
                if not outcome.ok:
                    errors.append(f"{outcome.plugin} {outcome.status}")

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert calls == {"a": 160, "b": 160, "c": 160}
    assert most == {"a": 1, "b": 1, "c": 1}
    assert host.hooks.drain(5) == []
    host.hooks.close()


def test_an_implementation_calling_a_hook_of_its_own_does_not_wait_on_itself(home: Path) -> None:
    seen: list[str] = []
    holder: dict[str, object] = {}

    class Caller(MemoryProvider):
        name = "caller"

        @hookimpl
        def on_message(self, message):
            if message.role == "user":  # a plugin that reacts by calling the kernel again
                holder["inner"] = holder["host"].hooks.on_message(  # type: ignore[attr-defined]
                    message=Message("assistant", "inner"), session=SESSION)
            seen.append(f"caller {message.content}")

    class Other(MemoryProvider):
        name = "other"

        @hookimpl
        def on_message(self, message):
            seen.append(f"other {message.content}")

    host = make_host(home, providers=[Caller, Other],
                     config_text="hooks:\n  timeouts:\n    on_message: 5\n")
    holder["host"] = host
    outer = host.hooks.on_message(message=Message("user", "outer"), session=SESSION)
    assert _statuses(outer) == {"caller": "ok", "other": "ok"}
    assert _statuses(holder["inner"]) == {"caller": "ok", "other": "ok"}  # type: ignore[arg-type]
    assert sorted(seen) == ["caller inner", "caller outer", "other inner", "other outer"]
    host.hooks.close()


def test_first_result_on_a_runner_leaves_no_lane_claimed(home: Path) -> None:
    asked: list[str] = []

    def provider(name: str, answer: bool) -> type[MemoryProvider]:
        @hookimpl
        def load_session(self, platform, conversation_key, session_id):
            asked.append(name)
            return (Session(id=f"from-{name}", platform=platform), []) if answer else None

        return type(name.title(), (MemoryProvider,), {"name": name, "load_session": load_session})

    host = make_host(home, providers=[provider("empty", False), provider("found", True),
                                      provider("never", True)])
    for _ in range(3):
        value, outcomes = host.hooks.load_session(platform="test", conversation_key="k",
                                                  session_id=None)
        assert value is not None and value[0].id == "from-found"
        assert [o.status for o in outcomes] == ["ok", "ok"]
    assert asked == ["empty", "found"] * 3  # the third implementation is never called
    assert host.hooks.drain(1) == []  # no lane left claimed by the call that stopped early
    host.hooks.close()


def test_a_hung_wrapper_is_bounded_and_treated_as_transparent(home: Path) -> None:
    release = threading.Event()
    log: list[str] = []

    class Before(MemoryProvider):
        name = "before"

        @hookimpl(wrapper=True)
        def on_message(self, message):
            release.wait(10)  # hangs before its yield
            log.append("before: late part")
            return (yield)

    class After(MemoryProvider):
        name = "after"

        @hookimpl(wrapper=True)
        def on_message(self, message):
            result = yield
            release.wait(10)  # hangs after its yield
            return result

    class Plain(MemoryProvider):
        name = "plain"

        @hookimpl
        def on_message(self, message):
            log.append(f"plain {message.content}")

    host = make_host(home, providers=[Plain, Before, After],
                     config_text="hooks:\n  timeouts:\n    on_message: 0.2\n")
    outcomes = host.hooks.on_message(message=Message("user", "one"), session=SESSION)
    assert _statuses(outcomes) == {"plain": "ok"}  # the call went on through both wrappers
    late = sorted((p.plugin, p.status) for p in host.hooks.problems)
    assert late == [("memory-provider:after", "timed_out"), ("memory-provider:before", "timed_out")]
    assert log == ["plain one"]
    release.set()
    assert host.hooks.drain(5) == []
    assert log == ["plain one", "before: late part"]  # the late part still ran, on its lane
    host.hooks.close()


def test_current_plugin_names_the_implementation_running(home: Path) -> None:
    seen: dict[str, str | None] = {}
    holder: dict[str, object] = {}

    def provider(name: str) -> type[MemoryProvider]:
        @hookimpl
        def on_message(self, message):
            seen[name] = holder["host"].hooks.current_plugin()  # type: ignore[attr-defined]

        return type(name.title(), (MemoryProvider,), {"name": name, "on_message": on_message})

    for providers in ([provider("solo")], [provider("a"), provider("b")]):  # a lane; a runner
        host = make_host(home, providers=providers)
        holder["host"] = host
        host.hooks.on_message(message=Message("user", "hi"), session=SESSION)
        host.hooks.close()
    assert seen == {"solo": "memory-provider:solo", "a": "memory-provider:a",
                    "b": "memory-provider:b"}
    assert host.hooks.current_plugin() is None  # outside any implementation


def test_conversations_have_their_own_lanes_and_one_conversation_stays_in_order(
        home: Path) -> None:
    from hermes_core._lanes import shard_of

    first = Session(id="sa", platform="test", attributes={"conversation_key": "alice"})
    other_key = next(k for k in (f"bob-{n}" for n in range(100))
                     if shard_of(k) != shard_of("alice"))
    second = Session(id="sb", platform="test", attributes={"conversation_key": other_key})
    entered = threading.Event()
    release = threading.Event()
    seen: list[str] = []

    class Slow(MemoryProvider):
        name = "slow"

        @hookimpl
        def on_message(self, message, session):
            if message.content == "block":
                entered.set()
                release.wait(10)
            seen.append(f"{session.id} {message.content}")

    host = make_host(home, providers=[Slow],
                     config_text="hooks:\n  timeouts:\n    on_message: 10\n")
    blocked = threading.Thread(target=host.hooks.on_message,
                               kwargs={"message": Message("user", "block"), "session": first})
    blocked.start()
    assert entered.wait(10)
    # the plugin is busy with alice's call: bob's call into the same plugin does not queue behind it
    outcomes = host.hooks.on_message(message=Message("user", "hello"), session=second)
    assert [o.status for o in outcomes] == ["ok"]
    assert seen == ["sb hello"]
    # alice's next call waits for her first one: one conversation's calls stay one at a time, in order
    later = threading.Thread(target=host.hooks.on_message,
                             kwargs={"message": Message("user", "after"), "session": first})
    later.start()
    release.set()
    blocked.join(10)
    later.join(10)
    assert seen == ["sb hello", "sa block", "sa after"]
    assert host.hooks.drain(5) == []
    host.hooks.close()


def test_a_plugin_late_in_one_conversation_is_only_probed_in_the_others(home: Path) -> None:
    from hermes_core._lanes import shard_of

    other = next(k for k in (f"c-{n}" for n in range(1, 200)) if shard_of(k) != shard_of("c-0"))
    keys = ["c-0", other]
    sessions = [Session(id=k, platform="test", attributes={"conversation_key": k}) for k in keys]
    release = threading.Event()
    answered: list[str] = []

    class Hung(MemoryProvider):
        name = "hung"

        @hookimpl
        def on_message(self, message, session):
            if message.content == "hang":
                release.wait(10)
            answered.append(f"{session.id} {message.content}")

    host = make_host(home, providers=[Hung],
                     config_text="hooks:\n  timeouts:\n    on_message: 1\n")
    first = host.hooks.on_message(message=Message("user", "hang"), session=sessions[0])
    assert [(o.status, o.seconds) for o in first] == [("timed_out", 1.0)]
    # another conversation, another lane, but the same plugin: one deadline was enough
    second = host.hooks.on_message(message=Message("user", "hang"), session=sessions[1])
    assert [(o.status, o.seconds) for o in second] == [("timed_out", 0.05)]
    release.set()
    assert host.hooks.drain(5) == []
    # it answers in time again: trusted again, on every lane
    third = host.hooks.on_message(message=Message("user", "fine"), session=sessions[1])
    assert [o.status for o in third] == ["ok"]
    assert sorted(answered) == sorted(["c-0 hang", f"{keys[1]} hang", f"{keys[1]} fine"])
    host.hooks.close()
