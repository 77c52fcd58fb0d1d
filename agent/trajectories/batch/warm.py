"""Imported once by the local executor's forkserver, so forked workers start warm.

Everything here is what each worker would otherwise load on its first task: the loop, the
built-in tools (and their modules), the bundled token encoding (~0.3 s to build), and, for an
SDK the forkserver imported before this module (see `executors.sdk_modules`), the modules its
client loads lazily on first use (~0.3 s more).
"""

from __future__ import annotations

import contextlib
import sys

import talaria.agent.loop  # noqa: F401
import talaria.agent.runtime  # noqa: F401
from talaria.agent.context import tokens
from talaria.tools.builtin import load_builtin_tools

load_builtin_tools()
tokens.encoding()

if "openai" in sys.modules:
    import talaria.agent.providers.openai  # noqa: F401

    with contextlib.suppress(Exception):  # a client only to load its modules: never used
        sys.modules["openai"].AsyncOpenAI(api_key="warm-up").chat.completions  # noqa: B018
if "anthropic" in sys.modules:
    import talaria.agent.providers.anthropic  # noqa: F401

    with contextlib.suppress(Exception):
        sys.modules["anthropic"].AsyncAnthropic(api_key="warm-up").messages  # noqa: B018
