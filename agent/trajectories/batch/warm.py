"""Imported once by the local executor's forkserver, so forked workers start warm.

Everything here is what each worker would otherwise load on its first task: the loop, the
built-in tools (and their modules), the bundled token encoding (~0.3 s to build), and, for an
SDK the forkserver imported before this module (see `sdk.sdk_modules`), the modules its
client loads lazily on first use (~0.3 s more).
"""

from __future__ import annotations

import sys

import talaria.agent.loop  # noqa: F401
import talaria.agent.runtime  # noqa: F401
from talaria.agent.context import tokens
from talaria.agent.trajectories.batch.sdk import warm_sdk
from talaria.tools.builtin import load_builtin_tools

load_builtin_tools()
tokens.encoding()

for _name in ("openai", "anthropic"):
    if _name in sys.modules:
        warm_sdk(_name)
