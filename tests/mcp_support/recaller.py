"""Source of a directory plugin for the MCP server tests: a memory provider whose ``prefetch``
answers from USER.md (the words of the query that appear there), so ``recall`` has real content."""

SOURCE = '''
from pathlib import Path

from hermes_core import MemoryProvider, hookimpl


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
'''
