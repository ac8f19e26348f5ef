"""MCP servers' tools as hermes-core tools: ``<server>__<tool>``.

:class:`McpTools` is the instance that holds the connections (a :class:`ClientManager`). It is
registered as the memory provider ``mcp`` because instances that offer tools are memory providers
or the engine in this kernel (``get_tools``); it implements no memory hook. Add ``mcp`` to
``memory.providers`` to give a session the tools of ``mcp.servers``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hermes_core import hookimpl
from hermes_core.errors import ToolError
from hermes_core.fence import neutralise, tool_result_text
from hermes_core.kinds import MemoryProvider, PluginContext, Tool
from hermes_core.types import ToolContext

from .client import CallFailed, ClientManager, RemoteTool
from .config import SEPARATOR, McpConfig

__all__ = ["McpTools", "build_tools", "tool_name"]

#: get_tools stops waiting for servers this long before the kernel's get_tools deadline
WAIT_MARGIN = 0.75
#: a server's tool list goes into every request to the model: a tool whose input schema is
#: larger than this (as JSON) is left out, and so are a server's tools past MAX_TOOLS_PER_SERVER
MAX_SCHEMA_CHARS = 20_000
MAX_TOOLS_PER_SERVER = 128
_BAD_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """The name the model sees; characters tool names cannot hold become ``_``."""
    return f"{server}{SEPARATOR}{_BAD_CHARS.sub('_', tool)}"


def _validator(schema: dict[str, Any]) -> Any:
    try:
        import jsonschema
    except ImportError:  # the mcp SDK depends on it; without it the server validates alone
        return None
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        return cls(schema)
    except jsonschema.SchemaError:
        return None


def _make_tool(manager: ClientManager, remote: RemoteTool, name: str, parallel: bool,
               max_chars: int) -> Tool:
    schema = dict(remote.input_schema)
    if schema.get("type") != "object":
        schema = {"type": "object", "properties": {}, **{k: v for k, v in schema.items() if k != "type"}}
    validator = _validator(schema)

    def handler(args: dict[str, Any], context: ToolContext) -> str:
        if validator is not None:
            errors = sorted(validator.iter_errors(args), key=lambda e: list(e.path))
            if errors:
                where = "/".join(str(p) for p in errors[0].path) or "(arguments)"
                raise ToolError(f"arguments for tool {remote.name!r} of MCP server {remote.server!r} "
                                f"do not match its schema at {where}: {errors[0].message}; nothing "
                                "was sent")
        try:
            text, is_error = manager.call(remote.server, remote.name, args)
        except CallFailed as exc:
            raise ToolError(str(exc)) from None
        # another program's words: no fence tags, bounded (mcp.max_result_chars)
        text = tool_result_text(text, limit=max_chars, source=f"MCP server {remote.server!r}")
        if is_error:
            raise ToolError(f"MCP server {remote.server!r}, tool {remote.name!r}: {text}")
        return text

    description = (remote.description or f"Tool {remote.name!r} of MCP server {remote.server!r}.")
    description = neutralise(f"[MCP server {remote.server}] {description}"[:4000])
    return Tool(name, description, handler,
                parameters=schema, parallel_safe=parallel)


def build_tools(manager: ClientManager, config: McpConfig) -> tuple[list[Tool], list[str]]:
    """The tools of every running server, and the problems met (names that clash or cannot be
    used); a refused tool is left out and named in the problem."""
    tools: list[Tool] = []
    problems: list[str] = []
    owners: dict[str, RemoteTool] = {}
    for state in manager.servers.values():
        if len(state.tools) > MAX_TOOLS_PER_SERVER:
            problems.append(f"MCP server {state.name!r} lists {len(state.tools)} tools; only its "
                            f"first {MAX_TOOLS_PER_SERVER} are offered (each is sent to the model "
                            "with every request)")
        for remote in state.tools[:MAX_TOOLS_PER_SERVER]:
            name = tool_name(remote.server, remote.name)
            size = len(json.dumps(remote.input_schema, ensure_ascii=False, default=str))
            if size > MAX_SCHEMA_CHARS:
                problems.append(f"tool {remote.name!r} of MCP server {remote.server!r} is left out: "
                                f"its input schema is {size:,} characters, over "
                                f"{MAX_SCHEMA_CHARS:,} (it would be sent with every request)")
                continue
            if len(name) > 64:
                problems.append(f"tool {remote.name!r} of MCP server {remote.server!r} is left out: "
                                f"{name!r} is longer than 64 characters; use a shorter server name")
                continue
            if name in owners:
                other = owners[name]
                problems.append(f"tool name clash: {name!r} is both tool {other.name!r} of MCP "
                                f"server {other.server!r} and tool {remote.name!r} of MCP server "
                                f"{remote.server!r}; the second is left out. Rename one server")
                continue
            owners[name] = remote
            parallel = remote.name in state.spec.parallel_safe
            tools.append(_make_tool(manager, remote, name, parallel, config.max_result_chars))
    return tools, problems


class McpTools(MemoryProvider):
    """The tools of the servers in ``mcp.servers`` (memory provider ``mcp``)."""

    name = "mcp"
    Config = McpConfig
    description = "tools of the MCP servers in mcp.servers, as <server>__<tool>"

    def __init__(self, config: McpConfig, context: PluginContext) -> None:
        super().__init__(config, context)
        self.settings = config
        self.manager = ClientManager(config.servers, connect_timeout=config.connect_timeout,
                                     call_timeout=config.call_timeout, log_dir=context.home / "logs")
        self._tools: list[Tool] | None = None
        self.tool_problems: list[str] = []
        self.manager.start(wait=False)  # servers start while the session is being set up

    def _tools_wait(self) -> float:
        try:
            bound = float(self.context.config.hooks.timeout("get_tools"))
        except AttributeError:  # built outside a host (tests of the class alone)
            bound = 5.0
        return max(0.1, bound - WAIT_MARGIN)

    def problems(self) -> list[str]:
        """What is wrong now: servers that failed or died, tools left out."""
        return [*self.manager.problems(), *self.tool_problems]

    @hookimpl
    def get_tools(self) -> list[Tool]:
        if self._tools is None:
            # within the kernel's get_tools deadline (hooks.timeouts.get_tools, 5 s by default)
            late = self.manager.wait_ready(min(self.settings.connect_timeout, self._tools_wait()))
            self._tools, self.tool_problems = build_tools(self.manager, self.settings)
            self.tool_problems += [
                f"MCP server {name!r} was still starting when the session's tools were listed; "
                "its tools are left out of this session (for a slow server raise "
                "hooks.timeouts.get_tools)" for name in late]
            # context.report_problem: doctor's activation check lists these as warnings
            for problem in self.problems():
                self.context.logger.error("%s", problem)
                self.context.report_problem(problem)
        return list(self._tools)

    @hookimpl
    def shutdown(self) -> None:
        self.manager.close()
