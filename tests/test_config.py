"""Settings resolve defaults < file < environment < arguments, and reject bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from engramdb.config import load_settings
from engramdb.errors import ConfigError


def test_precedence(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('embed_batch_size = 8\non_model_mismatch = "reembed"\nbusy_timeout = 5\n')
    env = {"ENGRAM_HOME": str(home), "ENGRAM_EMBED_BATCH_SIZE": "16"}
    s = load_settings(env)
    assert s.home == home
    assert s.embed_batch_size == 16  # env beats file
    assert s.on_model_mismatch == "reembed"  # file beats default
    assert s.busy_timeout == 5.0
    assert load_settings(env, embed_batch_size=32).embed_batch_size == 32  # argument beats env
    assert load_settings(env, embed_batch_size=None).embed_batch_size == 16  # None means unset


def test_default_home_is_dot_engram(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_settings({}).home == Path.home() / ".engram"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("embed_batch_size = 0", "embed_batch_size"),
        ('on_model_mismatch = "maybe"', "on_model_mismatch"),
        ("colour = 1", "unknown setting"),
        ("embed_batch_size = [", "cannot read config file"),
        ('embed_batch_size = "many"', "not a valid value"),
        ('embedder = "cloud"', "unknown embedder"),
    ],
)
def test_bad_config_file_is_a_config_error(tmp_path: Path, text: str, message: str):
    (tmp_path / "config.toml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings({"ENGRAM_HOME": str(tmp_path)})


def test_bad_environment_and_arguments(tmp_path: Path):
    with pytest.raises(ConfigError, match="not a valid value"):
        load_settings({"ENGRAM_HOME": str(tmp_path), "ENGRAM_BUSY_TIMEOUT": "soon"})
    with pytest.raises(ConfigError, match="unknown setting"):
        load_settings({"ENGRAM_HOME": str(tmp_path)}, nonsense=1)


def test_the_new_settings_come_from_the_environment(tmp_path):
    env = {
        "ENGRAM_HOME": str(tmp_path),
        "ENGRAM_AGENT": "carol",
        "ENGRAM_SYNCHRONOUS": "full",
        "ENGRAM_SESSIONS": "redis://localhost:6379/0",
        "ENGRAM_LLM": "openai:gpt-4o-mini",
        "ENGRAM_LLM_BASE_URL": "http://localhost:11434/v1",
        "ENGRAM_LLM_KEY_ENV": "MY_KEY",
        "ENGRAM_KNOWLEDGE_KEY": "k" * 32,
        "ENGRAM_MIN_SCORE": "0.3",
    }
    s = load_settings(env)
    assert (s.agent, s.synchronous, s.session_url, s.llm) == (
        "carol",
        "FULL",
        "redis://localhost:6379/0",
        "openai:gpt-4o-mini",
    )
    assert (s.llm_base_url, s.llm_key_env, s.knowledge_key, s.min_score) == (
        "http://localhost:11434/v1",
        "MY_KEY",
        "k" * 32,
        0.3,
    )
    assert "k" * 32 not in repr(s)
    defaults = load_settings({"ENGRAM_HOME": str(tmp_path)})
    assert (defaults.agent, defaults.synchronous, defaults.min_score, defaults.knowledge_key) == (
        "default",
        "NORMAL",
        0.0,
        None,
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("agent", "*"),
        ("agent", " padded"),
        ("synchronous", "OFF"),
        ("llm", "anthropic:claude"),
        ("llm_key_env", "not a var"),
        ("session_url", "localhost"),
        ("knowledge_key", "short"),
        ("min_score", "1.5"),
    ],
)
def test_bad_new_settings_are_config_errors(tmp_path, name, value):
    with pytest.raises(ConfigError):
        load_settings({"ENGRAM_HOME": str(tmp_path)}, **{name: value})
