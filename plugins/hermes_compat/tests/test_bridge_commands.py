"""Hermes plugins' CLI and slash commands (``hermes-core hermes NAME``, ``hermes-core hermes slash
NAME``) and their ``ctx.register_skill`` skills (the ``<plugin>_skill`` tool).

The plugins are written here in Hermes 0.19.0's form and dropped into the home's
``hermes-plugins/`` folder; the commands run in a real ``python -m hermes_core`` process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import drop_folder_plugin, run

#: a plugin with a CLI command (argparse sub-commands), a slash command and a skill
KIT = '''
from pathlib import Path
from hermes_constants import get_hermes_home


def _setup(parser):
    subs = parser.add_subparsers(dest="kit_cmd")
    count = subs.add_parser("count", help="count up")
    count.add_argument("--by", type=int, default=1)
    subs.add_parser("fail", help="exit with 3")


def _cli(args):
    if args.kit_cmd == "count":
        path = get_hermes_home() / "count.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        value = (int(path.read_text()) if path.exists() else 0) + args.by
        path.write_text(str(value))
        print(f"count is {value}")
        return 0
    if args.kit_cmd == "fail":
        return 3
    print("usage: hermes kit {count,fail}")
    return 0


def _slash(raw_args):
    return f"kit got {raw_args!r} in {get_hermes_home().name}"


def register(ctx):
    ctx.register_cli_command(name="kit", help="the kit", setup_fn=_setup, handler_fn=_cli)
    ctx.register_command("kit", handler=_slash, description="the kit")
    ctx.register_skill("packing", Path(__file__).parent / "packing.md",
                       description="how to pack for a trip")
    ctx.register_skill("unpacking", Path(__file__).parent / "unpacking.md")
'''

#: a second plugin claiming the name ``kit``, and the hermes group's own ``plugins``
TWIN = '''
def register(ctx):
    ctx.register_cli_command(name="kit", help="another kit", setup_fn=lambda p: None,
                             handler_fn=lambda args: print("the twin ran"))
    ctx.register_cli_command(name="plugins", help="claims hermes-core's name",
                             setup_fn=lambda p: None, handler_fn=lambda args: print("twin"))
    ctx.register_command("twin", handler=lambda raw: "twin slash")
'''


def hermes_core(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hermes_core", "hermes", *args],
                          capture_output=True, text=True, timeout=120)


def drop_kit(core_home: Path) -> Path:
    folder = drop_folder_plugin(core_home, "kit", KIT)
    (folder / "packing.md").write_text("# Packing\n\n1. List what you need.\n2. Pack it.\n",
                                       encoding="utf-8")
    (folder / "unpacking.md").write_text("---\nname: unpacking\n---\n# Unpack in reverse\n",
                                         encoding="utf-8")
    return folder


def test_cli_and_slash_commands_run_from_hermes_core(core_home: Path) -> None:
    drop_kit(core_home)
    out = hermes_core("kit", "count", "--by", "2")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "count is 2"
    # it ran with the plugin's own Hermes home inside the hermes-core home
    assert (core_home / "hermes-compat" / "kit" / "count.txt").read_text() == "2"
    assert hermes_core("kit", "count").stdout.strip() == "count is 3"
    assert hermes_core("kit", "fail").returncode == 3  # the handler's exit code
    helped = hermes_core("kit", "--help")
    assert helped.returncode == 0 and "usage: hermes-core hermes kit" in helped.stdout
    assert "count" in helped.stdout
    bad = hermes_core("kit", "count", "--by", "many")
    assert bad.returncode == 2 and "invalid int value" in bad.stderr

    slash = hermes_core("slash", "kit", "pack", "light")
    assert slash.returncode == 0, slash.stderr
    assert slash.stdout.strip() == "kit got 'pack light' in kit"
    assert hermes_core("slash", "/kit").stdout.strip() == "kit got '' in kit"

    unknown = hermes_core("nothing-here")
    assert unknown.returncode == 2 and "no command 'nothing-here'" in unknown.stderr
    missing = hermes_core("slash", "nothing-here")
    assert missing.returncode == 1
    assert "no Hermes plugin registers the slash command /nothing-here" in missing.stderr

    listed = json.loads(hermes_core("plugins", "--json").stdout)["plugins"]
    kit = next(p for p in listed if p["name"] == "hermes-kit")
    assert kit["commands"] == ["hermes-core hermes kit", "hermes-core hermes slash kit"]
    assert kit["skills"] == ["packing", "unpacking"] and kit["tools"] == ["kit_skill"]
    assert kit["unmapped"] == [] and kit["skipped"] == []
    text = hermes_core("plugins").stdout
    assert "command: hermes-core hermes kit" in text


def test_a_clashing_command_name_is_refused_naming_both(core_home: Path) -> None:
    drop_kit(core_home)
    drop_folder_plugin(core_home, "twin", TWIN)
    out = hermes_core("kit", "count")
    assert out.returncode == 1
    assert ("'hermes-core hermes kit' is refused: the name 'kit' is claimed by Hermes plugin "
            "'kit' (hermes kit) and by Hermes plugin 'twin' (hermes kit)") in out.stderr
    assert not (core_home / "hermes-compat" / "kit" / "count.txt").exists()
    # the hermes group's own command runs; the plugin's of that name is listed as refused
    own = hermes_core("plugins", "--json")
    assert own.returncode == 0
    listed = {p["name"]: p for p in json.loads(own.stdout)["plugins"]}
    twin = listed["hermes-twin"]
    assert twin["commands"] == ["hermes-core hermes slash twin"]
    refused = "\n".join(twin["unmapped"])
    assert ("hermes-core hermes plugins (command refused: the name is claimed by hermes-core "
            "itself and by Hermes plugin 'twin')") in refused
    assert ("hermes-core hermes kit (command refused: the name is claimed by Hermes plugin "
            "'kit' and by Hermes plugin 'twin')") in refused
    assert hermes_core("slash", "twin").stdout.strip() == "twin slash"


def test_skills_are_read_through_one_tool(core_home: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    drop_kit(core_home)
    turns = [{"user": "How do I pack?",
              "tool_calls": [{"name": "kit_skill", "arguments": {"name": "packing"}},
                             {"name": "kit_skill", "arguments": {"name": "sailing"}}],
              "assistant": "List, then pack."}]
    report = run(core_home, turns, providers=["file_memory", "hermes-kit"],
                 monkeypatch=monkeypatch)
    assert "kit_skill" in report.tools
    shown, missing = report.turns[0]["tool_calls"]
    assert shown["ok"] and shown["result"].startswith("# Packing\n\n1. List what you need.")
    assert not missing["ok"]
    assert "no skill 'sailing'; the skills are: packing, unpacking" in missing["result"]


#: a slash command that starts its work by putting a prompt into the conversation, as
#: hermes-dreaming's ``/dreaming run`` does (Hermes 0.19.0 queues it as the interactive CLI's next
#: input and answers False in its gateway)
NUDGE = '''
def register(ctx):
    def _slash(raw_args):
        queued = ctx.inject_message("Please run the cycle: " + raw_args)
        return f"queued={queued}"
    ctx.register_command("nudge", handler=_slash, description="asks the agent to act")
'''


def test_inject_message_is_refused_with_a_warning_naming_the_plugin(core_home: Path) -> None:
    drop_folder_plugin(core_home, "nudger", NUDGE)
    out = hermes_core("slash", "nudge", "now")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "queued=False"  # the plugin is told, as Hermes' gateway tells it
    assert "Hermes plugin 'nudger': ctx.inject_message()" in out.stderr
    assert "not delivered" in out.stderr
    assert "Please run the cycle" not in out.stderr  # the message itself is not logged
