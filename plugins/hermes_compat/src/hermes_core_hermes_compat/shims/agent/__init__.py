"""hermes-core's stand-in for Hermes Agent's ``agent`` package (only the modules plugins import)."""
