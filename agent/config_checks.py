"""How each setting's raw value (text from the environment or a TOML value) is checked and
converted: the `check` argument of `talaria.agent.config.setting`. Imports only tools' own
parsers, lazily."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def names(name: str, value: Any) -> tuple[str, ...]:
    """A list of strings; from the environment, comma-separated."""
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name} must be a list of strings, got {value!r}")
    return tuple(value)


def positive(name: str, value: Any) -> Any:
    """A positive int or float (the default's type); None stays None."""
    if value is None:
        return None
    number = float(value) if name in FLOAT_SETTINGS else int(value)
    if number <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return number


BOOLEANS = {"true": True, "1": True, "yes": True, "on": True,
            "false": False, "0": False, "no": False, "off": False}


def boolean(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in BOOLEANS:
        return BOOLEANS[value.strip().lower()]
    raise ValueError(f"{name} must be true or false, got {value!r}")


def choice(*choices: str | None) -> Callable[[str, Any], Any]:
    def check(name: str, value: Any) -> Any:
        if value not in choices:
            shown = ", ".join(c for c in choices if c is not None)
            raise ValueError(f"{name} must be one of {shown}, got {value!r}")
        return value
    return check


def mode(name: str, value: Any) -> str:
    from talaria.agent.modes import normalize_mode

    return normalize_mode(value)


def seconds_or_off(name: str, value: Any) -> float:
    """Seconds, 0 meaning off."""
    seconds = float(value)
    if seconds < 0:
        raise ValueError(f"{name} must be 0 (off) or a number of seconds, got {value!r}")
    return seconds


def share(name: str, value: Any) -> float:
    share = float(value)
    if not 0.1 <= share <= 1.0:
        raise ValueError(f"{name} must be between 0.1 and 1.0, got {value!r}")
    return share


def text(name: str, value: Any) -> Any:
    return value


def networks(name: str, value: Any) -> tuple[str, ...]:
    from talaria.tools.web.guard import parse_networks

    networks = names(name, value)
    parse_networks(networks)  # ValueError names the bad one
    return networks


FLOAT_SETTINGS = frozenset({"exec_timeout", "web_cache_ttl", "mcp_start_timeout", "mcp_call_timeout"})
