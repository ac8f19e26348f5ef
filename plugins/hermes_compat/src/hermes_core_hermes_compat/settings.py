"""A Hermes plugin's settings as a hermes-core config section.

Hermes describes a provider's settings with ``get_config_schema()``: a list of fields (``key``,
``description``, ``secret``, ``required``, ``default``, ``choices``, ``env_var``). In hermes-core
the non-secret fields live in the provider's section of config.yaml (``hermes-<name>:``) and are
checked against that list when the provider is built (``config validate`` and ``doctor`` build
it); secrets are read from the environment, never from config.yaml.
"""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from hermes_core.errors import ConfigError

__all__ = ["HermesSection", "check_section", "missing_secrets", "secret_env"]


class HermesSection(BaseModel):
    """The section of a ``hermes-<name>`` plugin: any keys here, checked against the plugin's own
    ``get_config_schema()`` once the plugin is imported."""

    model_config = ConfigDict(extra="allow")


def _fields(schema: Any, label: str) -> list[dict[str, Any]]:
    if isinstance(schema, dict):  # a few plugins return {key: field}
        schema = [{"key": k, **(v if isinstance(v, dict) else {})} for k, v in schema.items()]
    if not isinstance(schema, list):
        raise ConfigError(f"{label}: get_config_schema() returned {type(schema).__name__}, not a "
                          "list of fields; hermes-core cannot check its section (report it to "
                          "the plugin's author)")
    return [f for f in schema if isinstance(f, dict) and isinstance(f.get("key"), str)]


def secret_env(plugin: str, field: dict[str, Any]) -> str:
    """The environment variable holding a secret field (``env_var``, or ``PLUGIN_KEY``)."""
    explicit = field.get("env_var")
    if isinstance(explicit, str) and explicit:
        return explicit
    return re.sub(r"[^A-Z0-9]+", "_", f"{plugin}_{field['key']}".upper()).strip("_")


def check_section(values: dict[str, Any], schema: Any, *, plugin: str, section: str
                  ) -> dict[str, Any]:
    """The non-secret values of ``section`` checked against ``schema``; raises ConfigError
    naming each problem and its fix."""
    label = f"config section {section!r} (Hermes plugin {plugin!r})"
    fields = {f["key"]: f for f in _fields(schema, label)}
    problems: list[str] = []
    for key, value in values.items():
        spec = fields.get(key)
        if spec is None:
            allowed = ", ".join(sorted(k for k, f in fields.items() if not f.get("secret"))) or "none"
            problems.append(f"unknown key {key!r} (allowed: {allowed})")
        elif spec.get("secret"):
            problems.append(f"{key!r} is a secret: remove it from config.yaml and set the "
                            f"environment variable {secret_env(plugin, spec)} instead")
        elif isinstance(spec.get("choices"), list) and spec["choices"] and value not in spec["choices"]:
            problems.append(f"{key!r} is {value!r}; choose one of "
                            f"{', '.join(map(repr, spec['choices']))}")
    for key, spec in fields.items():
        if (spec.get("required") and not spec.get("secret") and key not in values
                and spec.get("default") is None):
            problems.append(f"{key!r} is required ({spec.get('description') or 'no description'}): "
                            f"hermes-core config set {section}.{key} VALUE")
    if problems:
        raise ConfigError(f"{label}: " + "; ".join(problems))
    return dict(values)


def missing_secrets(schema: Any, *, plugin: str) -> list[str]:
    """Environment variables of required secret fields that are unset."""
    try:
        fields = _fields(schema, plugin)
    except ConfigError:
        return []
    return [secret_env(plugin, f) for f in fields
            if f.get("secret") and f.get("required") and not os.environ.get(secret_env(plugin, f))]
