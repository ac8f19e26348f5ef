"""hermes-core's stand-in for Hermes Agent's ``tools`` package (only ``tools.registry``)."""
