"""'mcp token --rotate' when the token file cannot be replaced: a clear error, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core.bearer import CredentialError, rotate
from hermes_core.cli import cli


def test_rotate_over_a_folder_named_like_the_token_file_is_a_clear_error(home: Path) -> None:
    folder = home / "mcp-token"
    folder.mkdir(parents=True)
    (folder / "keep.txt").write_text("mine", encoding="utf-8")
    runner = CliRunner()
    shown = runner.invoke(cli, ["mcp", "token"])
    assert shown.exit_code == 1 and "--rotate" in shown.output  # the advice given ...
    for args in (["mcp", "token", "--rotate"], ["mcp", "token", "--rotate", "--json"]):
        result = runner.invoke(cli, args)  # ... and taken
        assert result.exit_code == 1, (args, result.output)
        assert not isinstance(result.exception, OSError), repr(result.exception)
        assert str(folder) in result.output and "folder" in result.output, result.output
        assert "Traceback" not in result.output
    assert (folder / "keep.txt").read_text(encoding="utf-8") == "mine"
    assert [p.name for p in home.iterdir() if p.name.startswith(".mcp-token")] == []
    folder.joinpath("keep.txt").unlink()
    folder.rmdir()
    fresh = runner.invoke(cli, ["mcp", "token", "--rotate", "--json"])
    assert fresh.exit_code == 0 and len(json.loads(fresh.output)["token"]) >= 16


def test_rotate_raises_the_credential_error_it_documents(home: Path) -> None:
    (home / "mcp-token").mkdir(parents=True)
    with pytest.raises(CredentialError, match="folder"):
        rotate(home)


def test_rotate_writes_through_a_symlinked_token_file(home: Path, tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o700)
    target = secrets / "hermes-token"
    target.write_text("old-token-0123456789abcdef\n", encoding="utf-8")
    target.chmod(0o600)
    home.mkdir(parents=True, exist_ok=True)
    link = home / "mcp-token"
    link.symlink_to(target)
    result = CliRunner().invoke(cli, ["mcp", "token", "--rotate", "--json"])
    assert result.exit_code == 0, result.output
    token = json.loads(result.output)["token"]
    assert link.is_symlink() and link.resolve() == target  # the link stays a link ...
    assert target.read_text(encoding="utf-8") == token + "\n"  # ... to the new token
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in secrets.iterdir()] == ["hermes-token"]


def test_rotate_over_a_link_to_a_folder_is_a_clear_error(home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    home.mkdir(parents=True, exist_ok=True)
    (home / "mcp-token").symlink_to(folder)
    with pytest.raises(CredentialError, match="folder"):
        rotate(home)
    assert (home / "mcp-token").is_symlink() and list(folder.iterdir()) == []
    (home / "mcp-token").unlink()
    (home / "mcp-token").symlink_to(home / "mcp-token")  # a loop
    with pytest.raises(CredentialError, match="cannot follow the link"):
        rotate(home)
