"""``hermes-core mcp serve``: the real mcp SDK client against the real command, over stdio and over
streamable HTTP on 127.0.0.1. No LLM is involved: the MCP client plays the agent's part."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_support import recaller
from mcp_support.serving import cli, cli_env, connect, http_server

from hermes_core.fence import build_block
from hermes_core.host import PluginHost
from hermes_core.prefetch import PrefetchRunner
from hermes_core.types import Session

CONFIG = """\
memory:
  providers: [file_memory, session_archive, skills, recaller, mcp]
  prefetch_timeout: 20
mcp:
  servers:
    never_started:
      command: {python}
      args: [-c, "raise SystemExit('a served stack must not start its MCP clients')"]
"""


@pytest.fixture
def stack_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    plugin = home / "plugins" / "recaller"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text(textwrap.dedent(recaller.SOURCE), encoding="utf-8")
    (home / "config.yaml").write_text(CONFIG.format(python=json.dumps(sys.executable)),
                                      encoding="utf-8")
    return home


def expected_recall(home: Path, query: str) -> str:
    """What the agent's prefetch would inject for ``query`` on this home, computed in-process."""
    import os

    saved = os.environ.get("HERMES_CORE_HOME")
    os.environ["HERMES_CORE_HOME"] = str(home)
    try:
        host = PluginHost.load(home, entry_points=False)
        host.activate("memory-provider", "recaller", config_key="memory.providers[3]")
        runner = PrefetchRunner(host, timeout=20)
        try:
            results = runner.run(query, Session(id="expected", platform="mcp"))
        finally:
            runner.close()
            host.shutdown()
    finally:
        if saved is None:
            os.environ.pop("HERMES_CORE_HOME", None)
        else:
            os.environ["HERMES_CORE_HOME"] = saved
    return build_block([(r.provider, r.text) for r in results])


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


async def drive(client: Client, home: Path) -> dict[str, Any]:
    """The whole scenario through one connection; returns what the assertions need."""
    out: dict[str, Any] = {}
    listed = await client.list_tools()
    out["tools"] = {t.name: t for t in listed.tools}
    added = await client.call_tool("memory", {"action": "add", "target": "user",
                                              "content": "The user drinks green tea every morning"})
    out["add"] = (added.is_error, text_of(added))
    out["user_md_after_add"] = (home / "memories" / "USER.md").read_bytes()
    recall = await client.call_tool("recall", {"query": "what tea does she drink"})
    out["recall"] = (recall.is_error, text_of(recall))
    remembered = await client.call_tool("remember", {"text": "The project deploys on Fridays"})
    out["remember"] = (remembered.is_error, text_of(remembered))
    # bad input: arguments failing the schema, an unknown tool; nothing stored may change
    before = (home / "memories" / "USER.md").read_bytes()
    bad = await client.call_tool("memory", {"action": "add", "target": "nobody", "content": "x"})
    out["bad_args"] = (bad.is_error, text_of(bad))
    missing = await client.call_tool("recall", {})
    out["missing_query"] = (missing.is_error, text_of(missing))
    try:
        await client.call_tool("no_such_tool", {"x": 1})
        out["unknown"] = None
    except MCPError as exc:
        out["unknown"] = str(exc)
    out["user_md_unchanged"] = (home / "memories" / "USER.md").read_bytes() == before
    searched = await client.call_tool("session_search", {"query": "green tea"})
    out["search"] = (searched.is_error, text_of(searched))
    created = await client.call_tool("skill_manage", {
        "action": "create", "name": "rotate-logs", "description": "When the disk fills with logs",
        "body": "1. Run logrotate -f on the service config."})
    out["skill_created"] = (created.is_error, text_of(created))
    resources = await client.list_resources()
    skill = await client.read_resource("hermes://skills/rotate-logs")
    out["skill_resource"] = skill.contents[0].text  # type: ignore[union-attr]
    out["resources"] = sorted(str(r.uri) for r in resources.resources)
    read = await client.read_resource("hermes://memory/USER.md")
    out["user_resource"] = read.contents[0].text  # type: ignore[union-attr]
    return out


def check(out: dict[str, Any], home: Path) -> None:
    tools = out["tools"]
    assert {"memory", "session_search", "skills_list", "recall", "remember"} <= set(tools)
    assert not [name for name in tools if "__" in name], "the served stack started its MCP clients"
    assert tools["memory"].input_schema["properties"]["target"]
    assert out["add"][0] is False and '"success": true' in out["add"][1]
    assert b"The user drinks green tea every morning" in out["user_md_after_add"]
    assert out["recall"] == (False, expected_recall(home, "what tea does she drink"))
    assert "## recaller" in out["recall"][1] and "tea" in out["recall"][1]
    assert out["remember"][0] is False
    assert "deploys on Fridays" in (home / "memories" / "MEMORY.md").read_text(encoding="utf-8")
    assert out["bad_args"][0] is True and "'memory'" in out["bad_args"][1]
    assert "nothing was changed" in out["bad_args"][1]
    assert out["missing_query"][0] is True and "'recall'" in out["missing_query"][1]
    assert out["unknown"] is not None and "no_such_tool" in out["unknown"]
    assert out["user_md_unchanged"]
    assert out["search"][0] is False and "green tea" in out["search"][1]
    assert "hermes://memory/USER.md" in out["resources"]
    assert out["skill_created"][0] is False, out["skill_created"]
    assert "hermes://skills/rotate-logs" in out["resources"]
    assert "logrotate -f" in out["skill_resource"]
    assert "green tea" in out["user_resource"]


def archived_mcp_sessions(home: Path) -> list[dict[str, Any]]:
    listed = cli(home, "sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return [s for s in json.loads(listed.stdout) if s.get("platform") == "mcp"]


def test_stdio_serve_exposes_the_stack(stack_home: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "hermes_core", "mcp", "serve"],
                                   env=cli_env(stack_home))

    async def scenario() -> dict[str, Any]:
        async with Client(params) as client:
            return await drive(client, stack_home)

    out = anyio.run(scenario)
    check(out, stack_home)
    sessions = archived_mcp_sessions(stack_home)
    assert len(sessions) == 1, sessions
    # the calls are not archived as turns (the conversation lives in the client)
    found = cli(stack_home, "sessions", "search", "what tea does she drink", "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["hits"] == [], found.stdout


def test_http_serve_exposes_the_stack(stack_home: Path) -> None:
    with http_server(stack_home) as url:
        assert url.startswith("http://127.0.0.1:")

        async def scenario() -> dict[str, Any]:
            async with connect(url) as client:
                return await drive(client, stack_home)

        out = anyio.run(scenario)
        check(out, stack_home)

        async def legacy() -> None:  # a stateful (mcp-session-id) client: its own session
            async with connect(url, mode="legacy") as client:
                for word in ("first", "second"):
                    await client.call_tool("recall", {"query": f"legacy client {word} call"})

        anyio.run(legacy)
    sessions = archived_mcp_sessions(stack_home)
    assert len(sessions) == 2, sessions
    found = cli(stack_home, "sessions", "search", "legacy client", "--json")
    assert found.returncode == 0 and json.loads(found.stdout)["hits"] == [], found.stdout


def test_a_hung_stack_tool_is_an_error_answer_and_the_server_goes_on(stack_home: Path) -> None:
    config = stack_home / "config.yaml"
    config.write_text(config.read_text(encoding="utf-8") + "hooks:\n  tool_timeout: 1\n",
                      encoding="utf-8")
    params = StdioServerParameters(command=sys.executable, args=["-m", "hermes_core", "mcp", "serve"],
                                   env=cli_env(stack_home))

    async def scenario() -> tuple[Any, Any]:
        async with Client(params) as client:
            stalled = await client.call_tool("stall", {})
            added = await client.call_tool("memory", {"action": "add", "target": "user",
                                                      "content": "Still answering after a hang"})
            return stalled, added

    stalled, added = anyio.run(scenario)
    assert stalled.is_error and "'stall'" in text_of(stalled) and "did not finish" in text_of(stalled)
    assert not added.is_error
    assert "Still answering" in (stack_home / "memories" / "USER.md").read_text(encoding="utf-8")


def test_served_tool_calls_start_no_thread_per_call(tmp_path: Path, monkeypatch: Any) -> None:
    """A tool call runs on the handler's worker thread, bounded by the async layer: a thread
    started per call cost a scheduling round trip and kept glibc arenas resident (issue 33)."""
    import threading

    from hermes_core.plugins.mcp.commands import activate_served_providers
    from hermes_core.plugins.mcp.server import StackServer

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("memory:\n  providers: [file_memory, session_archive]\n",
                                      encoding="utf-8")
    monkeypatch.setenv("HERMES_CORE_HOME", str(home))
    host = PluginHost.load(home, entry_points=False)
    activate_served_providers(host)
    stack = StackServer(host, transport="stdio")
    try:
        stack.serve("stdio", "warm-up", "session_search", {"query": "warm"})  # lanes start once
        started: list[str] = []
        real_start = threading.Thread.start

        def counting_start(self: threading.Thread) -> None:
            started.append(self.name)
            real_start(self)

        monkeypatch.setattr(threading.Thread, "start", counting_start)
        answers = [stack.serve("stdio", "client", "session_search", {"query": f"deploy {i}"})
                   for i in range(5)]
        added = stack.serve("stdio", "client", "memory",
                            {"action": "add", "target": "memory", "content": "Kept on a worker"})
    finally:
        monkeypatch.undo()
        stack.close()
        host.shutdown()
    assert not any(a.is_error for a in answers), [a.text for a in answers]
    assert not added.is_error, added.text
    assert not [n for n in started if n.startswith("hermes-tool")], started
    assert stack.deadline("session_search") == host.config.core.hooks.tool_timeout
    assert stack.deadline("recall") > stack.deadline("session_search")
