"""The hermes-core plugin module of the bridge (entry point ``hermes_compat``)."""

from __future__ import annotations
