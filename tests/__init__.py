"""Talaria's test suite; folders mirror the packages (acp/, agent/, tools/, cli/).

Shared fakes and harnesses sit at this level: `fakellm` (the fake LLM), `acpschema` and
`acp_harness` (the official schema, a scripted editor), `helpers`.
"""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
"""The repository checkout (editors/, benchmarks/, pyproject.toml)."""
