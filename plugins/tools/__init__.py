"""First-party tool plugins shipped inside hermes-core (imported as hermes_core.plugins.tools)."""
