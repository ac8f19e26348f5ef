"""Install the provider as a Hermes folder plugin (Hermes 0.19.0 reads no entry points).

``python -m hermes_core_hermes_compat.hermes_side install [HERMES_HOME]`` writes
``<HERMES_HOME>/plugins/hermes_core/__init__.py`` (``$HERMES_HOME`` or ``~/.hermes`` by default):
three lines that hand Hermes this distribution's provider, so the code stays in the installed
package and upgrades with it. Then set ``memory.provider: hermes_core`` in Hermes' config.yaml.
Hermes must run in a Python environment where this distribution is installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..importer.home import default_home
from . import PROVIDER_NAME

__all__ = ["FOLDER_PLUGIN", "install_folder_plugin", "main"]

#: the folder plugin's __init__.py (Hermes scans it for the word MemoryProvider)
FOLDER_PLUGIN = '''"""hermes-core's memory stack as this Hermes home's MemoryProvider (written by
python -m hermes_core_hermes_compat.hermes_side install; select it with memory.provider: {name})."""
from hermes_core_hermes_compat.hermes_side import register  # noqa: F401
'''


def install_folder_plugin(hermes_home: Path) -> Path:
    """Write the folder plugin into ``hermes_home``; return its folder."""
    if not hermes_home.is_dir():
        raise FileNotFoundError(
            f"{hermes_home} is not a folder: give the Hermes home (~/.hermes, or $HERMES_HOME)")
    folder = hermes_home / "plugins" / PROVIDER_NAME
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text(FOLDER_PLUGIN.format(name=PROVIDER_NAME),
                                        encoding="utf-8")
    return folder


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "install" or len(args) > 2:
        print("usage: python -m hermes_core_hermes_compat.hermes_side install [HERMES_HOME]",
              file=sys.stderr)
        return 2
    home = Path(args[1]).expanduser() if len(args) == 2 else default_home()
    try:
        folder = install_folder_plugin(home)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {folder}; now set memory.provider: {PROVIDER_NAME} in {home / 'config.yaml'} "
          "(hermes config set memory.provider hermes_core)")
    return 0
