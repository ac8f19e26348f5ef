"""``python -m hermes_core_hermes_compat.hermes_side install [HERMES_HOME]``."""

from __future__ import annotations

import sys

from .install import main

sys.exit(main())
