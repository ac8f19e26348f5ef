"""``hermes-core doctor``: the MCP plugin's checks (read only).

* ``mcp.servers`` set while ``mcp`` is not in ``memory.providers``: the servers' tools would
  silently never reach a session;
* the HTTP server's token file, when there is one: private and usable (as ``mcp serve`` demands).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hermes_core.doctor import DoctorCheck

if TYPE_CHECKING:
    from hermes_core.config import LoadedConfig

__all__ = ["mcp_checks"]


def mcp_checks(home: Path, config: LoadedConfig) -> list[DoctorCheck]:
    from hermes_core.config import validate_section

    from .config import McpConfig
    from .credential import TOKEN_FILE, CredentialError, resolve

    out: list[DoctorCheck] = []
    try:
        settings = validate_section(config, "mcp", McpConfig, plugin="mcp")
    except Exception:
        settings = McpConfig()  # the config check reports the section's own problems
    if settings.servers:
        used = "mcp" in config.core.memory.providers
        names = ", ".join(sorted(settings.servers))
        out.append(DoctorCheck(
            "mcp servers in use", True, warning=not used,
            detail=(f"mcp.servers ({names}) reach sessions through the 'mcp' provider" if used else
                    f"mcp.servers lists {names}, but 'mcp' is not in memory.providers: their tools "
                    "never reach a session"),
            fix=None if used else "add mcp to memory.providers (or remove mcp.servers)"))
    if (home / TOKEN_FILE).exists():
        try:
            resolve(home, settings.token_env)
        except CredentialError as exc:
            out.append(DoctorCheck("mcp token", False, detail=str(exc)))
        else:
            out.append(DoctorCheck("mcp token", True,
                                   detail=f"{home / TOKEN_FILE} is private (0600) and usable"))
    return out
