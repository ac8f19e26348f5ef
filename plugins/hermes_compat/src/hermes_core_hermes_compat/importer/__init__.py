"""Importing a Hermes Agent home into hermes-core (``hermes-core import hermes [PATH]``).

:func:`import_hermes` does the work (see :mod:`.run`); :mod:`.plugin` registers the command.
"""

from __future__ import annotations

from .home import HermesImportError, default_home
from .run import HermesImportReport, import_hermes

__all__ = ["HermesImportError", "HermesImportReport", "default_home", "import_hermes"]
