"""First-party embedders (the ``embedder`` plugin kind)."""
