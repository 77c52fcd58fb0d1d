"""Where Talaria keeps its state: `$TALARIA_HOME`, else `~/.talaria`. Resolved here only
(stdlib only: the sandbox launcher and the process watchdog import it too)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

DEFAULT = ".talaria"
"""The folder under the user's home when TALARIA_HOME is not set."""


def talaria_home(env: Mapping[str, str] | None = None, user_home: Path | None = None) -> Path:
    """`TALARIA_HOME` from `env` (default: this process's environment), else
    `user_home/.talaria` (default: the user's home)."""
    env = os.environ if env is None else env
    return Path(env.get("TALARIA_HOME") or (user_home or Path.home()) / DEFAULT).expanduser()
