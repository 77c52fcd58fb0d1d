"""Configuration layers: flag > environment > config.toml > default."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from talaria.agent.config import DEFAULT_CONTEXT_WINDOW, load_config


def write_config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)



def test_precedence_flag_env_file_default(tmp_path: Path) -> None:
    write_config(tmp_path, 'model = "anthropic:claude-file"\nmax_turns = 7\nmode = "plan"\n')
    env = {"TALARIA_HOME": str(tmp_path), "TALARIA_MODEL": "openai:from-env", "TALARIA_MAX_TURNS": "5"}
    config = load_config({"model": "openai:from-flag"}, env=env)
    assert (config.model, config.sources["model"]) == ("openai:from-flag", "flag")
    assert (config.max_turns, config.sources["max_turns"]) == (5, "env TALARIA_MAX_TURNS")
    assert (config.mode, config.sources["mode"]) == ("plan", "config.toml")
    assert config.sources["max_tokens"] == "default"


def test_named_providers_and_context_windows(tmp_path: Path) -> None:
    write_config(tmp_path, """
model = "ollama:qwen3"
fallback_models = ["openai:gpt-4.1"]
[providers.ollama]
base_url = "http://127.0.0.1:11434/v1"
context_window = 40960
""")
    config = load_config(env={"TALARIA_HOME": str(tmp_path)})
    assert config.fallback_models == ("openai:gpt-4.1",)
    assert config.window_for("ollama:qwen3") == 40960
    assert config.window_for("anthropic:claude-sonnet-4-5") == 200_000
    assert config.window_for("custom:unknown") == DEFAULT_CONTEXT_WINDOW


@pytest.mark.parametrize("text", ["model = [unclosed", 'max_turns = "zero"', "max_turns = -1",
                                  'providers = "x"'])
def test_bad_config_is_a_clear_error(tmp_path: Path, text: str) -> None:
    write_config(tmp_path, text)
    with pytest.raises(ValueError) as info:
        load_config(env={"TALARIA_HOME": str(tmp_path)})
    assert "config.toml" in str(info.value) or "max_turns" in str(info.value)


def test_talaria_config_masks_secrets_and_names_sources(tmp_path: Path) -> None:
    write_config(tmp_path, 'model = "openai:gpt-4.1"\n')
    env = {**os.environ, "TALARIA_HOME": str(tmp_path), "OPENAI_API_KEY": "sk-supersecretvalue123",
           "TALARIA_MAX_TURNS": "12"}
    out = subprocess.run([sys.executable, "-m", "talaria.acp_server.cli.main", "config"], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert "sk-supersecretvalue123" not in out
    assert "sk-…23" in out
    assert "openai:gpt-4.1  (config.toml)" in out
    assert "12  (env TALARIA_MAX_TURNS)" in out


def test_image_support_by_model_and_table(tmp_path: Path) -> None:
    write_config(tmp_path, "[providers.ollama]\nbase_url = 'http://x'\n[providers.mine]\nvision = true\n")
    config = load_config(env={"TALARIA_HOME": str(tmp_path)})
    assert config.supports_images("openai:gpt-4.1") and config.supports_images("anthropic:claude-x")
    assert config.supports_images("ollama:qwen2.5-vl") and config.supports_images("mine:anything")
    assert not config.supports_images("ollama:qwen3") and not config.supports_images("openai:gpt-3.5-turbo")
