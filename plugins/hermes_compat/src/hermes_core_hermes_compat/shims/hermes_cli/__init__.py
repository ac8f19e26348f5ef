"""hermes-core's stand-in for Hermes Agent's ``hermes_cli`` package (only ``hermes_cli.config``)."""
