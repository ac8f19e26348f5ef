"""The exceptions hermes-core raises.

Every error meant for a user derives from :class:`HermesCoreError`; the CLI prints its message and
exits non-zero without a traceback (``--debug`` shows one).
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "HermesCoreError",
    "NotStored",
    "PluginError",
    "PluginLoadError",
    "RegistryError",
    "ToolError",
    "UnknownNameError",
]


class HermesCoreError(Exception):
    """Base class of the errors a user can act on."""


class ConfigError(HermesCoreError):
    """config.yaml is malformed, has an unknown key or a value of the wrong type."""


class PluginError(HermesCoreError):
    """A plugin misbehaved; the message names the plugin and what to do."""


class PluginLoadError(PluginError):
    """A plugin could not be imported or registered (raised only in strict mode)."""


class RegistryError(PluginError):
    """Two plugins registered one name, or a registered class is malformed."""


class UnknownNameError(HermesCoreError):
    """The config names a provider, engine or platform that no loaded plugin registered."""


class ToolError(HermesCoreError):
    """A tool call failed in a way the model should be told about."""


class NotStored(HermesCoreError):
    """Raised by a memory provider's ``on_message`` when the message is neither stored nor kept
    anywhere to be stored later (its database is unreachable and it has no local spool). The
    kernel then fails the turn before the model is called and takes the message out of the
    history, so the sender is told to send it again instead of getting a reply for a message the
    conversation's store never saw."""
