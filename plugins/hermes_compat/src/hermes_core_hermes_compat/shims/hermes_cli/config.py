"""Stand-in for ``hermes_cli.config``: reading the plugin's Hermes-style ``config.yaml``.

The file read is ``config.yaml`` in the plugin's Hermes home (see ``hermes_constants``), which is
a folder of the hermes-core home: a plugin's settings come from its hermes-core config section
(written there through the plugin's own ``save_config``), never from ``~/.hermes``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["cfg_get", "get_config_path", "get_env_path", "get_hermes_home", "load_config",
           "read_raw_config"]


def get_hermes_home() -> Path:
    """The plugin's Hermes home, as the stand-in ``hermes_constants`` answers it."""
    import importlib

    return Path(importlib.import_module("hermes_constants").get_hermes_home())


def get_config_path() -> Path:
    return get_hermes_home() / "config.yaml"


def get_env_path() -> Path:
    return get_hermes_home() / ".env"


def read_raw_config() -> dict[str, Any]:
    """The plugin's config.yaml as a dict (``{}`` when absent or unreadable)."""
    path = get_config_path()
    try:
        import yaml

        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except Exception:  # unreadable, no yaml, or broken (yaml.YAMLError): empty, as in Hermes
        return {}
    return data if isinstance(data, dict) else {}


def load_config() -> dict[str, Any]:
    return read_raw_config()


load_config_readonly = load_config


def cfg_get(cfg: dict[str, Any] | None, *keys: str, default: Any = None) -> Any:
    """``cfg[k1][k2]...`` or ``default`` when any step is missing or not a mapping."""
    node: Any = cfg
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return default if node is None else node
