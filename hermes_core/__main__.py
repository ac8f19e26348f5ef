"""``python -m hermes_core`` runs the CLI."""

from .cli import main

main()
