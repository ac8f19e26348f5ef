"""The log file: ``$HERMES_CORE_HOME/logs/hermes-core.log``, rotated, with secrets masked.

Every command that does work (not ``--help`` or ``--version``) logs the kernel's and the plugins'
records at ``logging.level`` (default ``INFO``; ``serve --log-level`` overrides it) to a rotating
file: ``logging.max_bytes`` per file (1 MB), ``logging.backups`` old files (5). ``logging.file:
false`` turns it off. The terminal keeps showing warnings and errors only.

Secrets never reach the file: a filter masks Anthropic-style keys (``sk-...``), bearer tokens,
passwords in URLs (``postgresql://user:***@host``), ``key=value`` pairs whose key names a secret,
and the literal values of environment variables whose names say they are secret
(``*_KEY``, ``*_SECRET``, ``*_TOKEN``, ``*_PASSWORD``).
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
from pathlib import Path
from typing import Any

__all__ = ["LOG_NAME", "SecretFilter", "mask", "setup_file_log"]

LOG_NAME = "hermes-core.log"
_MASK = "***"
_PATTERNS = [
    re.compile(r"sk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-~+/=]{8,}"),
    re.compile(r"(?i)(\w+://[^:/@\s]+:)[^@\s]+(@)"),
    re.compile(r"(?i)\b([\w-]*(?:api[_-]?key|secret|token|password|passwd)[\w-]*\s*[=:]\s*)"
               r"['\"]?[^\s'\",;]{4,}"),
]
_SECRET_ENV = re.compile(r"(KEY|SECRET|TOKEN|PASSWORD|PASSWD)$")


def _env_secrets() -> list[str]:
    return sorted((v for k, v in os.environ.items() if _SECRET_ENV.search(k.upper()) and len(v) >= 6),
                  key=len, reverse=True)


def mask(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with every secret it carries replaced by ``***``."""
    for value in secrets if secrets is not None else _env_secrets():
        text = text.replace(value, _MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + _MASK
                           + (m.group(2) if m.re.groups >= 2 and m.group(2) else ""), text)
    return text


class SecretFilter(logging.Filter):
    """Masks secrets in a record's final message (arguments merged, exception text included)."""

    def __init__(self) -> None:
        super().__init__()
        self._secrets = _env_secrets()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.msg, record.args = mask(message, self._secrets), None
        if record.exc_text:
            record.exc_text = mask(record.exc_text, self._secrets)
        return True


class _PrivateRotatingFile(logging.handlers.RotatingFileHandler):
    """A rotating file whose every new file is created 0600 (rotation opens a fresh one)."""

    def _open(self):  # type: ignore[no-untyped-def]
        from .private import private_file

        private_file(Path(self.baseFilename))
        return super()._open()


def _settings(config_file: Path) -> dict[str, Any]:
    """``logging:`` read straight from the YAML (the command validates the whole file itself)."""
    import yaml

    try:
        raw = yaml.safe_load(config_file.read_text(encoding="utf-8")) or {}
        section = raw.get("logging") or {}
    except (OSError, ValueError, AttributeError, yaml.YAMLError):
        return {}
    return section if isinstance(section, dict) else {}


def setup_file_log(home: Path, *, level: str | None = None) -> Path | None:
    """Attach the rotating, secret-masking file handler to the ``hermes_core`` logger (once per
    process). Returns the file, or ``None`` when it is off or cannot be written (never fatal)."""
    logger = logging.getLogger("hermes_core")
    target = (home / "logs" / LOG_NAME).absolute()
    for handler in list(logger.handlers):
        if getattr(handler, "hermes_core_file", False):
            if Path(getattr(handler, "baseFilename", "")) == target:
                return target
            logger.removeHandler(handler)  # another home (tests, --home): follow it
            handler.close()
    settings = _settings(home / "config.yaml")
    if settings.get("file") is False:
        return None
    name = str(level or settings.get("level") or "INFO").upper()
    numeric = logging.getLevelName(name)
    if not isinstance(numeric, int):
        numeric = logging.INFO
    from .private import private_dir, private_file

    folder = home / "logs"
    try:
        private_dir(folder)
        private_file(folder / LOG_NAME)  # created 0600; rotation renames it, keeping the mode
        handler = _PrivateRotatingFile(
            folder / LOG_NAME, maxBytes=int(settings.get("max_bytes") or 1_000_000),
            backupCount=int(settings.get("backups") or 5), encoding="utf-8", delay=True)
    except (OSError, ValueError):
        return None
    handler.hermes_core_file = True  # type: ignore[attr-defined]
    handler.setLevel(numeric)
    handler.addFilter(SecretFilter())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > numeric or logger.level == logging.NOTSET:
        logger.setLevel(numeric)
    return folder / LOG_NAME
