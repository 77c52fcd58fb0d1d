"""`talaria setup`: choose a provider, a model and an API key, at a terminal.

Writes `$TALARIA_HOME/config.toml` (`model = "provider:model"`, plus a `[providers.NAME]` table
with `base_url` and `api_key_env` for OpenAI-compatible endpoints) and keeps the key out of it:
the key goes to `$TALARIA_HOME/credentials` (mode 0600, `KEY=VALUE` lines), which `load_config`
reads under the real environment (an exported variable wins). Nothing is checked over the
network. The key is read with `getpass` (never echoed), or from stdin when stdin is not a
terminal, so scripts and editors' terminal auth can run it too:

    echo "$KEY" | talaria setup --provider openai --model gpt-4.1 --api-key-env OPENAI_API_KEY
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Choice:
    name: str
    label: str
    model: str
    """Suggested model."""
    key_env: str | None
    """Variable holding the key; None: no key needed."""
    base_url: str | None
    """Suggested endpoint, for providers configured by a `[providers.NAME]` table."""
    table: bool


CHOICES = (
    Choice("openai", "OpenAI", "gpt-4.1", "OPENAI_API_KEY", None, False),
    Choice("anthropic", "Anthropic", "claude-sonnet-4-5", "ANTHROPIC_API_KEY", None, False),
    Choice("openrouter", "OpenRouter", "anthropic/claude-sonnet-4.5", "OPENROUTER_API_KEY",
           "https://openrouter.ai/api/v1", True),
    Choice("ollama", "Ollama (local, no key)", "qwen3-coder", None, "http://localhost:11434/v1", True),
    Choice("custom", "Another OpenAI-compatible endpoint", "", None, None, True),
)
BY_NAME = {c.name: c for c in CHOICES}
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
ASKS = 3
"""Times a question is asked again when its answer looks like an API key."""


class SetupError(Exception):
    """A choice that cannot work; the message says what to pass instead."""


def setup_cli(args: argparse.Namespace | None = None) -> int:
    from talaria.agent.config import talaria_home

    args = args or argparse.Namespace()
    interactive = sys.stdin.isatty()
    try:
        plan = _plan(args, interactive)
        home = talaria_home()
        key = _read_key(plan["key_env"], interactive)
        config_path = write_config(home, plan["model"], plan["table_name"], plan["table"])
        if key:
            store_credential(home, plan["key_env"], key)
    except SetupError as exc:
        print(f"talaria setup: {exc}", file=sys.stderr)
        return 2
    except (EOFError, KeyboardInterrupt):
        print("\ntalaria setup: cancelled, nothing written", file=sys.stderr)
        return 130
    except (OSError, ValueError) as exc:
        print(f"talaria setup: {exc}", file=sys.stderr)
        return 2
    print(f"Wrote {config_path}: model = {plan['model']!r}")
    key_env = plan["key_env"]
    if key:
        print(f"Stored {key_env} in {home / 'credentials'} (readable by you only)")
    elif key_env and not os.environ.get(key_env):
        from talaria.agent.config import load_credentials

        if key_env not in load_credentials(home):
            print(f"Note: no key stored and {key_env} is not set; export it or run setup again.")
    print('Try it: talaria run "Say hello"')
    return 0


def _plan(args: argparse.Namespace, interactive: bool) -> dict[str, Any]:
    """Provider, model, endpoint and key variable, from flags or questions."""
    name = getattr(args, "provider", None)
    if not name:
        if not interactive:
            raise SetupError("--provider is required when stdin is not a terminal")
        name = _menu()
    if name not in BY_NAME:
        raise SetupError(f"unknown provider {name!r}; choose from {', '.join(BY_NAME)}")
    choice = BY_NAME[name]
    model = _no_key("--model", getattr(args, "model", None)) or _ask("Model", choice.model, interactive)
    if not model:
        raise SetupError("a model name is required (--model)")
    key_env = _no_key("--api-key-env", getattr(args, "api_key_env", None))
    table_name, table = (_no_key("--name", getattr(args, "name", None)) or name), {}
    if choice.table:
        base_url = (_no_key("--base-url", getattr(args, "base_url", None))
                    or _ask("Base URL", choice.base_url, interactive))
        if not base_url or not re.match(r"https?://", base_url):
            raise SetupError("an http(s) base URL is required (--base-url)")
        table["base_url"] = base_url
        if name == "custom" and not key_env and interactive:
            default = f"{table_name.upper().replace('-', '_')}_API_KEY"
            key_env = _ask("Variable for its API key (empty: no key)", default, interactive)
        key_env = key_env or choice.key_env
        if key_env:
            table["api_key_env"] = key_env
    elif key_env and key_env != choice.key_env:
        raise SetupError(f"{name} reads its key from {choice.key_env}, not {key_env}")
    else:
        key_env = choice.key_env
    if key_env and not ENV_NAME.match(key_env):
        raise SetupError(f"{key_env!r} is not a valid environment variable name")
    if not re.fullmatch(r"[A-Za-z0-9_-]+", table_name):
        raise SetupError(f"provider name {table_name!r}: use letters, digits, - and _")
    model = model.removeprefix(f"{table_name}:")
    return {"model": f"{table_name}:{model}", "key_env": key_env,
            "table_name": table_name if choice.table else None, "table": table}


def _menu() -> str:
    print("Which provider?")
    for i, choice in enumerate(CHOICES, 1):
        print(f"  {i}) {choice.label}")
    answer = input("Number [1]: ").strip() or "1"
    if answer.isdigit() and 1 <= int(answer) <= len(CHOICES):
        return CHOICES[int(answer) - 1].name
    return answer


def _ask(question: str, default: str | None, interactive: bool) -> str:
    """The answer, or `default`; an answer that looks like an API key is asked for again
    (config.toml is 0644: a key pasted at the wrong prompt must never land there)."""
    if not interactive:
        return default or ""
    for _ in range(ASKS):
        answer = input(f"{question} [{default}]: " if default else f"{question}: ").strip()
        if not looks_like_key(answer):
            return answer or default or ""
        print(f"That looks like an API key, not a {question.lower()}: the key is asked for "
              "later, hidden, and kept out of config.toml.")
    raise SetupError(f"no {question.lower()} given (each answer looked like an API key)")


def looks_like_key(text: str) -> bool:
    """Whether `text` holds something shaped like a secret (the redaction rules: `sk-...`,
    tokens, credentials in a URL, long random runs)."""
    from talaria.tools.redact import redact_text

    return bool(text) and redact_text(text) != text


def _no_key(flag: str, value: str | None) -> str | None:
    """A flag's value, unless it looks like an API key (it would be written to config.toml)."""
    if value and looks_like_key(value):
        raise SetupError(f"{flag} looks like an API key; pass the key on stdin or at the hidden "
                         "prompt (it goes to the 0600 credentials file, never to config.toml)")
    return value


def _read_key(key_env: str | None, interactive: bool) -> str:
    """The key typed (hidden) or piped in; "" keeps whatever is configured now."""
    if not key_env:
        return ""
    if interactive:
        keep = " (Enter keeps the current one)" if os.environ.get(key_env) else ""
        return getpass.getpass(f"{key_env}{keep}: ").strip()
    return sys.stdin.readline().strip()


def write_config(home: Path, model: str, table_name: str | None, table: dict[str, Any]) -> Path:
    """Set `model` (and `[providers.table_name]`) in `home/config.toml`, keeping the rest."""
    from talaria.agent.config import read_config_file

    path = home / "config.toml"
    try:
        data = read_config_file(path)
    except ValueError as exc:
        raise SetupError(f"{path} is not valid TOML ({exc.__cause__}); fix or remove it first") from None
    if path.is_file():
        path.with_name("config.toml.bak").write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    data["model"] = model
    if table_name:
        providers = data.setdefault("providers", {})
        providers[table_name] = {**providers.get(table_name, {}), **table}
        if "api_key_env" not in table:
            providers[table_name].pop("api_key_env", None)
    home.mkdir(parents=True, exist_ok=True)
    _replace(path, to_toml(data), mode=0o644)
    return path


def store_credential(home: Path, name: str, value: str) -> None:
    """Set `name=value` in `home/credentials` (mode 0600), keeping the other lines."""
    path = home / "credentials"
    lines = []
    if path.is_file():
        lines = [line for line in path.read_text(encoding="utf-8").splitlines()
                 if line.partition("=")[0].strip() != name]
    home.mkdir(parents=True, exist_ok=True)
    _replace(path, "\n".join([*lines, f"{name}={value}"]) + "\n", mode=0o600)


def _replace(path: Path, text: str, *, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)  # never readable by others
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def to_toml(data: dict[str, Any], prefix: str = "") -> str:
    """Plain values first, then tables: enough TOML for a config file (comments are lost)."""
    plain = [f"{_key(k)} = {_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    out = "\n".join(plain) + ("\n" if plain else "")
    for k, v in data.items():
        if isinstance(v, dict):
            name = f"{prefix}{_key(k)}"
            body = to_toml(v, f"{name}.")
            header = f"\n[{name}]\n" if any(not isinstance(x, dict) for x in v.values()) or not v else ""
            out += header + body
    return out


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    return value.isoformat()  # dates and times
