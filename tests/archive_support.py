"""The session archive on either backend, for the tests parametrised over ``storage_url``."""

from __future__ import annotations

from pathlib import Path

from hermes_core.plugins.memory.session_archive import SessionArchive, open_archive
from hermes_core.plugins.memory.session_archive.config import SessionArchiveConfig


def make_archive(tmp_path: Path, storage_url: str | None) -> SessionArchive:
    """``<tmp_path>/state.db`` when ``storage_url`` is None, else that PostgreSQL database."""
    return open_archive(SessionArchiveConfig(path=str(tmp_path / "state.db")), tmp_path,
                        storage_url)
