"""Talaria as a Harbor agent: Harbor's ACP runner drives `talaria acp` in the task's container,
and Talaria is installed there offline, from a wheelhouse made on the host.

    python3.12 editors/harbor/wheels.py dist/harbor-wheels      # once per checkout
    PYTHONPATH=editors/harbor harbor run -p examples/harbor/hello-world -e podman \\
        -a talaria_harbor:Talaria --ak wheels=dist/harbor-wheels -m openai/gpt-4.1 \\
        --ae OPENAI_API_KEY="$OPENAI_API_KEY"

Harbor's own ACP install (`-a acp` with a registry entry) runs apt-get, downloads uv and a
Python, and `uvx` fetches the agent from the package index: none of that works without a
network in the container. This agent keeps Harbor's ACP runner and trajectory (it is Harbor's
`AcpAgent`) and replaces only the install: the wheelhouse is uploaded, a venv is made with the
image's Python (`--without-pip`; pip runs from its wheel), and Talaria and the runner's
`agent-client-protocol` are installed into it with `--no-index`. The image needs a Python of
the wheelhouse's version (wheels.py makes one for any version >= 3.11) and bash (Harbor's).

`-m provider/model` (Harbor's spelling) starts Talaria on `provider:model` (Talaria's); keys
and endpoints reach it through `--ae` (OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY...).
Without `-m`, Talaria's own configuration in the container decides (TALARIA_MODEL via `--ae`).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harbor.agents.installed.acp import AcpAgent, AcpOptions
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from pydantic import Field

HERE = Path(__file__).resolve().parent
REGISTRY_ENTRY = HERE.parent / "registry" / "agent.json"
MANIFEST = "talaria-harbor.json"
WHEELS_IN_CONTAINER = "/installed-agent/talaria-wheels"


class TalariaOptions(AcpOptions):
    wheels: str | None = Field(
        default=None, description="The wheelhouse editors/harbor/wheels.py made (required).")


class WheelhouseError(ValueError):
    """No usable wheelhouse; the message says how to make one."""


def read_wheelhouse(wheels: str | None) -> tuple[Path, dict[str, str]]:
    """The wheelhouse directory and its manifest, or WheelhouseError."""
    make = "make one with `python3.12 editors/harbor/wheels.py DIR` and pass --ak wheels=DIR"
    if not wheels:
        raise WheelhouseError(f"Talaria's Harbor agent needs its wheels: {make}")
    where = Path(wheels).expanduser().resolve()
    try:
        manifest = json.loads((where / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise WheelhouseError(f"{where} is not a Talaria wheelhouse (no {MANIFEST}): {make}") from None
    if not (where / str(manifest.get("wheel"))).is_file():
        raise WheelhouseError(f"{where}: {manifest.get('wheel')} is missing: {make}")
    return where, manifest


def talaria_model(harbor_model: str | None) -> str | None:
    """Harbor's `openai/gpt-4.1` as Talaria's `openai:gpt-4.1` (a name with a colon is kept)."""
    if not harbor_model or ":" in harbor_model or "/" not in harbor_model:
        return harbor_model
    provider, _, model = harbor_model.partition("/")
    return f"{provider}:{model}"


class Talaria(AcpAgent):
    """Harbor's ACP agent, with Talaria's registry entry and an offline install."""

    options_model = TalariaOptions
    options: TalariaOptions
    VENV = AcpAgent._RUNNER_VENV_PATH
    """One venv for the runner and Talaria: Harbor runs its runner with this venv's python."""

    def __init__(self, *args: Any, wheels: str | None = None, **kwargs: Any) -> None:
        self._wheels, self._manifest = read_wheelhouse(wheels)
        entry = json.loads(REGISTRY_ENTRY.read_text(encoding="utf-8"))
        env = {}
        if (model := talaria_model(kwargs.get("model_name"))) is not None:
            env["TALARIA_MODEL"] = model
        entry.update(version=self._manifest["talaria"], distribution={
            "local": {"cmd": f"{self.VENV}/bin/talaria", "args": ["acp"], "env": env}})
        super().__init__(*args, registry_entry=entry, wheels=wheels, **kwargs)

    @staticmethod
    def name() -> str:
        return "talaria"

    @classmethod
    def preflight(cls, kwargs: dict[str, Any] | None = None,
                  env: Mapping[str, str] | None = None) -> None:
        """A missing wheelhouse is said before any trial starts."""
        super().preflight(kwargs, env)
        read_wheelhouse((kwargs or {}).get("wheels"))

    async def install(self, environment: BaseEnvironment) -> None:
        version = self._manifest["python"]
        python = await self._image_python(environment, version)
        await environment.upload_dir(source_dir=self._wheels, target_dir=WHEELS_IN_CONTAINER)
        pip_wheel = next(self._wheels.glob("pip-*.whl")).name
        wheels = shlex.quote(WHEELS_IN_CONTAINER)
        await self.exec_as_root(environment, command=" && ".join([
            f"rm -rf {self.VENV}",
            f"{shlex.quote(python)} -m venv --without-pip {self.VENV}",
            f"{self.VENV}/bin/python {wheels}/{pip_wheel}/pip install --no-index --quiet "
            f"--disable-pip-version-check --find-links {wheels} "
            f"talaria-agent=={self._manifest['talaria']} agent-client-protocol",
            f"chmod -R a+rX {self.VENV}",
            f"{self.VENV}/bin/talaria --version",
        ]))

    async def _image_python(self, environment: BaseEnvironment, version: str) -> str:
        """The image's python of `version`, or a RuntimeError saying what to do."""
        want = tuple(int(part) for part in version.split("."))
        probe = "; ".join([
            f"for p in python{version} python3 python; do",
            f"  if command -v $p >/dev/null && $p -c 'import sys; sys.exit(sys.version_info[:2] != {want})'",
            "  then command -v $p; exit 0; fi",
            "done; exit 3"])
        found = await environment.exec(command=probe, user="root")
        if found.return_code != 0 or not (found.stdout or "").strip():
            raise RuntimeError(
                f"the task image has no Python {version}, which the Talaria wheels in "
                f"{self._wheels} are for: make wheels for the image's Python "
                f"(python3.N editors/harbor/wheels.py DIR, or --python 3.N)")
        return (found.stdout or "").strip().splitlines()[-1]

    async def run(self, instruction: str, environment: BaseEnvironment,
                  context: AgentContext) -> None:
        # The runner selects the session's model by the name it is given, among the names
        # Talaria offers: Talaria's spelling, so the selection is made and recorded.
        harbor_model = self.model_name
        self.model_name = talaria_model(harbor_model)
        try:
            await super().run(instruction, environment, context)
        finally:
            self.model_name = harbor_model
