"""Building the ``openai`` model client for tests, as the kernel does: its config section
validated, a real PluginContext (``PluginHost.llm``), the real openai SDK talking to the loopback
OpenAI-compatible server (hermes_core.testing.OpenAIAPIServer, whose script fakes the words)."""

from __future__ import annotations

from pathlib import Path

from hermes_core import PluginHost
from hermes_core.config import parse_config_text
from hermes_core.plugins.llm.openai import OpenAIClient
from hermes_core.testing import OpenAIAPIServer

__all__ = ["client_config", "openai_client"]


def client_config(api: OpenAIAPIServer | None, openai_extra: str = "", llm_extra: str = "") -> str:
    """config.yaml lines selecting the openai client against ``api`` (no key needed)."""
    base = f"  base_url: {api.base_url}\n" if api is not None else ""
    return (f"llm:\n  client: openai\n  model: gpt-test\n  max_retries: 0\n  timeout: 20\n"
            f"{llm_extra}openai:\n{base}  api_key_env: null\n{openai_extra}")


def openai_client(home: Path, api: OpenAIAPIServer | None, openai_extra: str = "",
                  llm_extra: str = "") -> OpenAIClient:
    """The client ``llm.client: openai`` selects, built by the kernel (``PluginHost.llm``)."""
    config = parse_config_text(client_config(api, openai_extra, llm_extra), home / "config.yaml")
    host = PluginHost.load(home, config=config, builtins=True, entry_points=False,
                           directories=False)
    client = host.llm("main")
    assert isinstance(client, OpenAIClient)
    return client
