"""Source of a directory plugin for the MCP server tests: a memory provider whose ``prefetch``
answers from USER.md (the words of the query that appear there), so ``recall`` has real content,
and a tool ``stall`` that never returns (a hung plugin)."""

SOURCE = '''
import threading
from pathlib import Path

from hermes_core import MemoryProvider, Tool, hookimpl

NEVER = threading.Event()


class Recaller(MemoryProvider):
    name = "recaller"

    @hookimpl
    def prefetch(self, query, session):
        path = Path(self.context.home) / "memories" / "USER.md"
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        words = [w for w in query.lower().split() if len(w) > 2 and w in text.lower()]
        return f"USER.md mentions: {', '.join(words)}" if words else None


@hookimpl
def register_memory_providers(register):
    register(Recaller)


@hookimpl
def register_tools(register):
    register(Tool("stall", "Never returns.", lambda args, ctx: NEVER.wait(),
                  parameters={"type": "object", "properties": {}}))
'''
