"""One test per hook: each is dispatched by the kernel to a throwaway plugin, with its arguments.

``test_docs.py`` fails when a hook in hermes_core.hookspecs has no ``test_hook_<name>`` here.
"""

from __future__ import annotations

from hermes_core import (
    CompressionResult,
    ContextEngine,
    EndReason,
    IncomingMessage,
    MemoryProvider,
    MemoryWrite,
    Message,
    Platform,
    PluginHost,
    Session,
    SwitchReason,
    Tool,
    ToolContext,
    Usage,
    hookimpl,
)

SESSION = Session(id="s1")
CALLS: list[tuple[str, object]] = []


class Recorder(MemoryProvider):
    name = "recorder"

    @hookimpl
    def system_prompt_block(self, session):
        return f"block for {session.id}"

    @hookimpl
    def prefetch(self, query):  # opt-in arguments: takes only what it uses
        return f"recalled about {query}"

    @hookimpl
    def queue_prefetch(self, query, session):
        CALLS.append(("queue_prefetch", (query, session.id)))

    @hookimpl
    def on_message(self, message, session):
        CALLS.append(("on_message", (message.role, message.content, session.id)))

    @hookimpl
    def sync_turn(self, user_message, assistant_message, session, messages):
        CALLS.append(("sync_turn", (user_message.content, assistant_message.content, len(messages))))

    @hookimpl
    def on_turn_cancelled(self, user_message, session, messages):
        CALLS.append(("cancelled", (user_message.content, session.id, len(messages))))

    @hookimpl
    def on_pre_compress(self, messages):
        return f"keep {len(messages)} facts"

    @hookimpl
    def on_session_switch(self, new_session, old_session, reason):
        CALLS.append(("switch", (new_session.id, old_session.id if old_session else None, reason)))

    @hookimpl
    def on_session_end(self, session, messages, reason):
        CALLS.append(("end", (session.id, len(messages), reason)))

    @hookimpl
    def on_erasure(self, generation):
        CALLS.append(("erasure", generation))

    @hookimpl
    def on_memory_write(self, write):
        CALLS.append(("write", (write.action, write.content)))

    @hookimpl
    def get_tools(self):
        return [Tool(name="recall", description="d", parameters={"type": "object"},
                     handler=lambda args, ctx: {"ok": True})]

    @hookimpl
    def shutdown(self):
        CALLS.append(("shutdown", self.name))


class Broken(MemoryProvider):
    name = "broken"

    @hookimpl
    def prefetch(self, query):
        raise RuntimeError("provider exploded")

    @hookimpl
    def on_memory_write(self, write):
        CALLS.append(("broken-write", write.content))

    @hookimpl
    def shutdown(self):
        CALLS.append(("shutdown", self.name))


class Engine(ContextEngine):
    name = "counting"

    def __init__(self, config, context):
        super().__init__(config, context)
        self.usage: list[Usage] = []

    @hookimpl
    def should_compress(self, messages, prompt_tokens):
        return (prompt_tokens or 0) > 100

    @hookimpl
    def compress(self, messages, focus_topic, memory_context):
        summary = f"summary of {len(messages)} ({focus_topic}; {memory_context})"
        return CompressionResult(messages=[Message("user", summary), messages[-1]], summary=summary)

    @hookimpl
    def update_from_response(self, usage):
        self.usage.append(usage)


class Echo(Platform):
    name = "echo"

    @hookimpl
    def connect(self, dispatcher):
        self.dispatcher = dispatcher
        self.replies = [dispatcher.handle(IncomingMessage("echo", "k1", "hi"))]

    @hookimpl
    def disconnect(self):
        CALLS.append(("disconnect", self.name))

    @hookimpl
    def send(self, conversation_key, text):
        return f"sent {text} to {conversation_key}"


def standalone_tool(args, ctx):
    return {"sum": args["a"] + args["b"], "plugin": ctx.plugin_name}


class Registrar:
    @hookimpl
    def register_memory_providers(self, register):
        register(Recorder)
        register(Broken)

    @hookimpl
    def register_context_engines(self, register):
        register(Engine)

    @hookimpl
    def register_tools(self, register):
        register(Tool(name="add", description="add two numbers", handler=standalone_tool,
                      parameters={"type": "object", "properties": {"a": {"type": "integer"},
                                                                   "b": {"type": "integer"}}},
                      parallel_safe=True))

    @hookimpl
    def register_platforms(self, register):
        register(Echo)


def make_host(home):
    CALLS.clear()
    host = PluginHost.load(home, builtins=False, entry_points=False, directories=False,
                           plugins=[("registrar", Registrar())])
    host.activate("memory-provider", "recorder", config_key="memory.providers[0]")
    host.activate("memory-provider", "broken", config_key="memory.providers[1]")
    return host


def test_hook_register_memory_providers(home):
    host = make_host(home)
    assert host.registries.memory_providers.names() == ["broken", "recorder"]
    assert host.records["registrar"].kinds == [
        "memory-provider", "context-engine", "tool", "platform"]


def test_hook_register_context_engines(home):
    host = make_host(home)
    engine = host.activate("context-engine", "counting", config_key="context.engine")
    assert isinstance(engine, Engine) and engine.context.plugin_name == "registrar"


def test_hook_register_tools(home):
    host = make_host(home)
    tool, plugin = host.tools()["add"]
    assert plugin == "registrar" and tool.parallel_safe
    assert tool.invoke({"a": 2, "b": 3}, ToolContext(plugin_name=plugin)) == (
        '{"sum": 5, "plugin": "registrar"}')


def test_hook_register_platforms(home):
    host = make_host(home)
    assert host.registries.platforms.names() == ["echo"]


def test_hook_system_prompt_block(home):
    outcomes = make_host(home).hooks.system_prompt_block(session=SESSION)
    assert [(o.plugin, o.value) for o in outcomes] == [("memory-provider:recorder", "block for s1")]


def test_hook_prefetch(home):
    outcomes = {o.plugin: o for o in make_host(home).hooks.prefetch(query="cats", session=SESSION)}
    assert outcomes["memory-provider:recorder"].value == "recalled about cats"
    assert isinstance(outcomes["memory-provider:broken"].error, RuntimeError)  # isolated


def test_hook_queue_prefetch(home):
    make_host(home).hooks.queue_prefetch(query="q", session=SESSION)
    assert CALLS == [("queue_prefetch", ("q", "s1"))]


def test_hook_on_message(home):
    make_host(home).hooks.on_message(message=Message("user", "hello"), session=SESSION)
    assert CALLS == [("on_message", ("user", "hello", "s1"))]


def test_hook_sync_turn(home):
    history = [Message("user", "u"), Message("assistant", "a")]
    make_host(home).hooks.sync_turn(user_message=history[0], assistant_message=history[1],
                              session=SESSION, messages=history)
    assert CALLS == [("sync_turn", ("u", "a", 2))]


def test_hook_on_turn_cancelled(home):
    history = [Message("user", "u"), Message("assistant", "half", tool_calls=[])]
    make_host(home).hooks.on_turn_cancelled(user_message=history[0], session=SESSION,
                                            messages=history)
    assert CALLS == [("cancelled", ("u", "s1", 2))]


def test_hook_on_pre_compress(home):
    outcomes = make_host(home).hooks.on_pre_compress(messages=[Message("user", "x")],
                                         session=SESSION)
    assert [o.value for o in outcomes] == ["keep 1 facts"]


def test_hook_on_session_switch(home):
    child = Session(id="s2", parent_session_id="s1")
    make_host(home).hooks.on_session_switch(new_session=child, old_session=SESSION,
                              reason=SwitchReason.COMPRESSION)
    assert CALLS == [("switch", ("s2", "s1", SwitchReason.COMPRESSION))]


def test_hook_on_session_end(home):
    make_host(home).hooks.on_session_end(session=SESSION, messages=[],
                              reason=EndReason.USER_EXIT)
    assert CALLS == [("end", ("s1", 0, EndReason.USER_EXIT))]


def test_hook_on_erasure(home):
    make_host(home).hooks.on_erasure(generation=3)
    assert CALLS == [("erasure", 3)]


def test_an_erasure_recorded_in_the_home_reaches_on_erasure_once(home):
    import time

    from hermes_core.storage.erasures import record_erasure

    host = make_host(home)
    assert host.heed_erasures() == 0 and CALLS == []  # the first read is the baseline
    record_erasure("forget", home=home, config_url=False)
    deadline = time.monotonic() + 5
    while not CALLS and time.monotonic() < deadline:  # a read within a few ms is reused
        host.heed_erasures()
    assert CALLS == [("erasure", 1)]
    host.heed_erasures()
    assert CALLS == [("erasure", 1)]  # once per change


def test_hook_on_memory_write(home):
    host = make_host(home)
    host.notify_memory_write(MemoryWrite("add", "user", "likes tea", provider="recorder"))
    # the writer itself is skipped; every other active provider hears of it
    assert CALLS == [("broken-write", "likes tea")]


def test_hook_shutdown(home):
    host = make_host(home)
    host.shutdown()
    assert CALLS == [("shutdown", "broken"), ("shutdown", "recorder")]  # reverse activation
    assert host.instances == {}


def test_hook_get_tools(home):
    tools = make_host(home).tools()
    assert set(tools) == {"add", "recall"}
    assert tools["recall"][1] == "memory-provider:recorder"


def test_hook_should_compress(home):
    host = make_host(home)
    host.activate("context-engine", "counting", config_key="context.engine")
    assert host.hooks.should_compress(messages=[], prompt_tokens=101, session=SESSION) is True
    assert host.hooks.should_compress(messages=[], prompt_tokens=None, session=None) is False


def test_hook_compress(home):
    host = make_host(home)
    host.activate("context-engine", "counting", config_key="context.engine")
    history = [Message("user", "a"), Message("assistant", "b"), Message("user", "c")]
    result = host.hooks.compress(messages=history, focus_topic="db", memory_context="likes tea",
                                 session=SESSION)
    assert result.summary == "summary of 3 (db; likes tea)"
    assert [m.content for m in result.messages][1] == "c"


def test_hook_update_from_response(home):
    host = make_host(home)
    engine = host.activate("context-engine", "counting", config_key="context.engine")
    host.hooks.update_from_response(usage=Usage(input_tokens=7, cache_read_tokens=3))
    assert engine.usage[0].prompt_tokens == 10


class Dispatcher:
    def handle(self, message):
        return f"reply to {message.text}"

    def stream(self, message):
        yield "reply"


def test_hook_connect(home):
    host = make_host(home)
    platform = host.activate("platform", "echo", config_key="platform")
    host.hooks.connect(only="platform:echo", dispatcher=Dispatcher())
    assert platform.replies == ["reply to hi"]


def test_hook_disconnect(home):
    host = make_host(home)
    host.activate("platform", "echo", config_key="platform")
    host.hooks.disconnect()
    assert CALLS == [("disconnect", "echo")]


def test_hook_send(home):
    host = make_host(home)
    host.activate("platform", "echo", config_key="platform")
    assert host.pm.hook.send(conversation_key="k9", text="ping") == ["sent ping to k9"]


def test_tool_name_collision_between_plugins_names_both(home):
    import pytest

    from hermes_core import RegistryError

    class Clash(MemoryProvider):
        name = "clash"

        @hookimpl
        def get_tools(self):
            return [Tool(name="recall", description="d", parameters={"type": "object"},
                         handler=lambda a, c: "")]

    class ClashPlugin:
        @hookimpl
        def register_memory_providers(self, register):
            register(Clash)

    host = PluginHost.load(home, builtins=False, entry_points=False, directories=False,
                           plugins=[("registrar", Registrar()), ("clasher", ClashPlugin())])
    host.activate("memory-provider", "recorder", config_key="m")
    host.activate("memory-provider", "clash", config_key="m")
    with pytest.raises(RegistryError) as exc:
        host.tools()
    assert "memory-provider:recorder" in str(exc.value)
    assert "memory-provider:clash" in str(exc.value)


def test_provider_failing_to_start_is_skipped_and_named(home, caplog):
    class Fails(MemoryProvider):
        name = "fails"

        def __init__(self, config, context):
            raise OSError("disk gone")

    class P:
        @hookimpl
        def register_memory_providers(self, register):
            register(Fails)
            register(Recorder)

    (home / "config.yaml").write_text("memory:\n  providers: [fails, recorder]\n")
    host = PluginHost.load(home, builtins=False, entry_points=False, directories=False,
                           plugins=[("p", P())])
    active = host.activate_memory_providers()
    assert [type(a).__name__ for a in active] == ["Recorder"]
    assert "plugin 'p': memory provider 'fails' failed to start: OSError: disk gone" in caplog.text
