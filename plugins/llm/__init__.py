"""First-party model clients (the ``llm`` plugin kind)."""
