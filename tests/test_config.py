"""config.yaml: core validation, plugin sections, environment overrides, edits, redaction."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from hermes_core import ConfigError, MemoryProvider, PluginHost, hookimpl
from hermes_core.config import load_config, parse_config_text, redacted
from hermes_core.config_edit import set_config_value


class DemoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mode: str = "auto"
    budget: int = Field(default=10, ge=1)
    api_key: SecretStr | None = Field(default=None, json_schema_extra={"env": "DEMO_API_KEY"})


class Demo(MemoryProvider):
    name = "demo"
    Config = DemoConfig


class DemoPlugin:
    @hookimpl
    def register_memory_providers(self, register):
        register(Demo)


def host_for(home, text):
    (home / "config.yaml").write_text(text)
    return PluginHost.load(home, builtins=False, entry_points=False, directories=False,
                           plugins=[("demo-plugin", DemoPlugin())])


def test_missing_file_means_defaults(home):
    loaded = load_config(home)
    assert loaded.exists is False
    assert loaded.core.context.engine == "compressor"
    assert loaded.core.memory.prefetch_timeout == 0.3


def test_malformed_yaml_names_line(home):
    with pytest.raises(ConfigError) as exc:
        parse_config_text("llm:\n  model: x\n  bad: [1, 2\n", home / "config.yaml")
    assert "malformed YAML" in str(exc.value) and "line" in str(exc.value)


def test_unknown_core_key_names_key_line_and_allowed(home):
    with pytest.raises(ConfigError) as exc:
        parse_config_text("llm:\n  model: x\n  modle: y\n", home / "config.yaml")
    msg = str(exc.value)
    assert "line 3" in msg and "'llm.modle'" in msg and "max_tokens" in msg


def test_wrong_type_names_key_and_value(home):
    with pytest.raises(ConfigError) as exc:
        parse_config_text("memory:\n  prefetch_timeout: soon\n", home / "config.yaml")
    msg = str(exc.value)
    assert "memory.prefetch_timeout" in msg and "line 2" in msg and "'soon'" in msg


def test_top_level_must_be_mapping(home):
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        parse_config_text("- a\n- b\n", home / "config.yaml")


def test_duplicate_provider_refused(home):
    with pytest.raises(ConfigError, match="listed twice"):
        parse_config_text("memory:\n  providers: [a, a]\n", home / "config.yaml")


def test_plugin_section_validated_by_its_model(home):
    host = host_for(home, "demo:\n  budget: 0\n")
    with pytest.raises(ConfigError) as exc:
        host.validate_config()
    msg = str(exc.value)
    assert "demo.budget" in msg and "'demo-plugin'" in msg and "line 2" in msg


def test_plugin_section_unknown_key_lists_allowed(home):
    host = host_for(home, "demo:\n  mood: happy\n")
    with pytest.raises(ConfigError) as exc:
        host.validate_config()
    assert "'demo.mood'" in str(exc.value) and "mode, budget, api_key" in str(exc.value)


def test_unknown_top_level_key(home):
    host = host_for(home, "context:\n  engine: x\nwhatever: 1\n")
    problems = dict(host.config_problems())
    assert "unknown top-level key 'whatever'" in problems["whatever"]
    assert "line 3" in problems["whatever"]


def test_selection_of_unknown_provider(home):
    host = host_for(home, "memory:\n  providers: [demo, nope]\n")
    problems = dict(host.config_problems())
    assert "memory.providers[1]=nope" in problems
    assert "Available: demo" in problems["memory.providers[1]=nope"]
    assert "memory.providers[0]=demo" not in problems


def test_env_overrides_secret(home, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-123")
    monkeypatch.setenv("DEMO_API_KEY", "demo-secret")
    host = host_for(home, "")
    assert host.config.core.llm.api_key.get_secret_value() == "sk-test-123"
    assert host.plugin_config(Demo).api_key.get_secret_value() == "demo-secret"


def test_redaction_of_secret_values_only():
    data = {"llm": {"api_key": SecretStr("x"), "max_tokens": 10},
            "honcho": {"auth_token": "abc", "workspace": "w", "apikey": ""}}
    out = redacted(data)
    assert out["llm"] == {"api_key": "**********", "max_tokens": 10}
    assert out["honcho"] == {"auth_token": "**********", "workspace": "w", "apikey": ""}


def test_set_refused_leaves_file_byte_identical(home):
    original = "# my settings\ncontext:\n  engine: x   # keep\n"
    path = home / "config.yaml"
    path.write_text(original)

    def refuse(_loaded):
        raise ConfigError("no")

    with pytest.raises(ConfigError):
        set_config_value(path, "context.engine", "y", validate=refuse)
    assert path.read_text() == original
    with pytest.raises(ConfigError):
        set_config_value(path, "llm.max_tokens", "many", validate=lambda _l: None)
    assert path.read_text() == original


def test_set_keeps_comments_and_order(home):
    path = home / "config.yaml"
    path.write_text("# top comment\nllm:\n  model: a  # the model\ncontext:\n  engine: x\n")
    set_config_value(path, "llm.max_tokens", 99, validate=lambda _l: None)
    text = path.read_text()
    assert "# top comment" in text and "# the model" in text
    assert text.index("llm:") < text.index("context:")
    assert load_config(home).core.llm.max_tokens == 99


def test_set_into_missing_file_creates_it(home):
    set_config_value(home / "config.yaml", "memory.prefetch_timeout", 0.5,
                     validate=lambda _l: None)
    assert load_config(home).core.memory.prefetch_timeout == 0.5


def test_validate_change_ignores_problems_that_were_already_there(home):
    host = host_for(home, "")  # default engine 'compressor' is not loaded here
    assert any(k.startswith("context.engine") for k, _ in host.config_problems())
    path = home / "config.yaml"
    set_config_value(path, "demo.budget", 5,
                     validate=lambda new: host.validate_change(host.config, new))
    assert "budget: 5" in path.read_text()
    with pytest.raises(ConfigError, match="not changed"):
        set_config_value(path, "memory.providers", ["ghost"],
                         validate=lambda new: host.validate_change(host.config, new))
    assert "ghost" not in path.read_text()


class KeyedConfig(BaseModel):
    api_key: str  # required: no default


class Keyed(MemoryProvider):
    name = "keyed"
    Config = KeyedConfig


class KeyedPlugin:
    @hookimpl
    def register_memory_providers(self, register):
        register(Keyed)


def test_selecting_a_provider_whose_required_config_is_absent_is_refused(home):
    """A selected plugin with no config section runs on its defaults; when those lack a required
    field, `config set` refuses the selection (it used to accept it, and only `config validate`
    or the session's start named the field) and says what to set first."""
    path = home / "config.yaml"
    path.write_text("context:\n  engine: none\n")
    host = PluginHost.load(home, builtins=False, entry_points=False, directories=False,
                           plugins=[("keyed-plugin", KeyedPlugin())])
    with pytest.raises(ConfigError) as caught:
        set_config_value(path, "memory.providers", ["keyed"],
                         validate=lambda new: host.validate_change(host.config, new))
    message = str(caught.value)
    assert "memory.providers[0] selects 'keyed'" in message
    assert "keyed.api_key" in message and "Field required" in message
    assert "hermes-core config set keyed.FIELD VALUE" in message
    assert "keyed" not in path.read_text()
    # set the section first, then the selection is accepted
    set_config_value(path, "keyed.api_key", "k-123",
                     validate=lambda new: host.validate_change(host.config, new))
    set_config_value(path, "memory.providers", ["keyed"],
                     validate=lambda new: host.validate_change(load_config(home), new))
    assert load_config(home).core.memory.providers == ["keyed"]


@pytest.mark.parametrize("seconds", ["1e308", ".inf"])
def test_an_llm_timeout_no_clock_can_wait_is_refused(home, seconds):
    """llm.timeout had no upper bound: 1e308 or .inf passed, and every model call then failed
    as 'the LLM endpoint could not be reached' (the socket's timeout overflows)."""
    with pytest.raises(ConfigError, match=r"llm\.timeout"):
        parse_config_text(f"llm:\n  timeout: {seconds}\n", home / "config.yaml")
    assert parse_config_text("llm:\n  timeout: 3600\n", home / "config.yaml").core.llm.timeout == 3600


def test_a_summary_timeout_no_clock_can_wait_is_refused(home):
    """compression.summary_timeout had no upper bound: 1e308 passed, and every summary call then
    failed (its deadline overflows), each compaction silently falling back."""
    from click.testing import CliRunner

    from hermes_core.cli import cli

    runner = CliRunner()
    refused = runner.invoke(cli, ["config", "set", "compression.summary_timeout", "1e308"])
    assert refused.exit_code == 1 and "compression.summary_timeout" in refused.output
    assert not (home / "config.yaml").exists()
    kept = runner.invoke(cli, ["config", "set", "compression.summary_timeout", "600"])
    assert kept.exit_code == 0, kept.output
