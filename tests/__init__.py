"""Talaria's test suite; folders mirror the packages (acp/, agent/, tools/, cli/).

Shared fakes and harnesses sit at this level: `fakellm` (the fake LLM), `acpschema` and
`acp_harness` (the official schema, a scripted editor), `helpers`.
"""

import os
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
"""The repository checkout (editors/, benchmarks/, pyproject.toml)."""


def processes() -> list[Path]:
    """/proc's process directories. Not `Path("/proc").glob("[0-9]*/stat")`: its existence
    check of `stat` raises ProcessLookupError (not a FileNotFoundError) for a process that
    exits meanwhile. Reads of the returned paths still race an exit: catch OSError."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    return [Path("/proc", name) for name in names if name.isdigit()]
