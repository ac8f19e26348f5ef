"""First-party model clients (the ``llm`` plugin kind): one package per client."""
