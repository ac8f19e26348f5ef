"""First-party plugins shipped inside hermes-core (imported as hermes_core.plugins)."""
