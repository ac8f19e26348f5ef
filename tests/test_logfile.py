"""The log file in $HERMES_CORE_HOME/logs/: written by commands, rotated, secrets masked."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

from click.testing import CliRunner

from hermes_core._logfile import mask, setup_file_log
from hermes_core.cli import cli


def _detach() -> None:
    logger = logging.getLogger("hermes_core")
    for handler in list(logger.handlers):
        if getattr(handler, "hermes_core_file", False):
            logger.removeHandler(handler)
            handler.close()


def test_a_command_writes_the_log_with_secrets_masked(home: Path, monkeypatch) -> None:
    monkeypatch.setenv("HERMES_CORE_WEBHOOK_SECRET", "a-very-long-webhook-secret-value")
    try:
        result = CliRunner().invoke(cli, ["plugins", "list"])
        assert result.exit_code == 0
        log = logging.getLogger("hermes_core.test")
        log.warning("connecting with key sk-ant-api03-abcdefghijkl to postgresql://bob:hunter22@db/x")
        log.warning("secret is %s; token=abcd1234efgh", "a-very-long-webhook-secret-value")
        path = home / "logs" / "hermes-core.log"
        text = path.read_text(encoding="utf-8")
    finally:
        _detach()
    assert "hermes-core" in text and "plugins" in text
    for secret in ("abcdefghijkl", "hunter22", "a-very-long-webhook-secret-value", "abcd1234efgh"):
        assert secret not in text, secret
    assert "postgresql://bob:***@db/x" in text
    assert stat.S_IMODE((home / "logs").stat().st_mode) == 0o700


def test_level_and_off_switch_come_from_config(home: Path) -> None:
    (home / "config.yaml").write_text("logging:\n  level: ERROR\n")
    try:
        path = setup_file_log(home)
        assert path is not None
        logging.getLogger("hermes_core.x").warning("not kept at ERROR level")
        logging.getLogger("hermes_core.x").error("kept")
        text = path.read_text(encoding="utf-8")
    finally:
        _detach()
    assert "kept" in text and "not kept" not in text
    (home / "config.yaml").write_text("logging:\n  file: false\n")
    assert setup_file_log(home) is None


def test_mask_leaves_plain_text_alone() -> None:
    assert mask("plain words, 42 of them", []) == "plain words, 42 of them"
    assert mask("Authorization: Bearer abc.def.ghi-123", []) == "Authorization: Bearer ***"
