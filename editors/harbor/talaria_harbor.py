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

The trajectory Harbor writes from the ACP session also gets the result of an edit (its card
is a diff, which Harbor's converter does not read). Calls are named by their ACP `kind`
(`edit`, `execute`...): the runner's ACP SDK drops the unstable `name` Talaria sends.

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
from harbor.models.trajectories import Observation, ObservationResult, Trajectory
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
    for wheel in (str(manifest.get("wheel")), "pip-*.whl"):
        if not any(where.glob(wheel)):
            raise WheelhouseError(f"{where}: {wheel} is missing: {make}")
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
        # The background review's model calls and skill writes would leak into a measured
        # trial (batches turn it off too); `--ae TALARIA_SELF_IMPROVEMENT=true` keeps it.
        given = kwargs.get("extra_env") or {}
        env = {} if "TALARIA_SELF_IMPROVEMENT" in given else {"TALARIA_SELF_IMPROVEMENT": "false"}
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
            f"{self.VENV}/bin/python -c 'import acp'",  # the runner's import, checked now
            f"{self.VENV}/bin/talaria --version",
        ]))

    async def _image_python(self, environment: BaseEnvironment, version: str) -> str:
        """The image's python of `version`, or a RuntimeError saying what to do."""
        want = tuple(int(part) for part in version.split("."))
        probe = "\n".join([
            f"for p in python{version} python3 python; do",
            f"  if command -v $p >/dev/null && $p -c 'import sys; sys.exit(sys.version_info[:2] != {want})'",
            "  then command -v $p; exit 0; fi",
            "done",
            "exit 3"])
        found = await environment.exec(command=probe, user="root")
        if found.return_code != 0 or not (found.stdout or "").strip():
            raise RuntimeError(
                f"the task image has no Python {version}, which the Talaria wheels in "
                f"{self._wheels} are for: make wheels for the image's Python "
                f"(python3.N editors/harbor/wheels.py DIR, or --python 3.N)")
        return (found.stdout or "").strip().splitlines()[-1]

    def _convert_events_to_trajectory(self, *, summary: dict[str, Any] | None,
                                      events: list[dict[str, Any]]) -> Trajectory | None:
        """Harbor's ATIF, with the result the model got (`rawOutput`) for a call whose card
        holds none of the shapes Harbor's converter reads (an edit's card is its diff), so no
        call is without its observation."""
        trajectory = super()._convert_events_to_trajectory(summary=summary, events=events)
        if trajectory is None:
            return None
        outputs = _raw_outputs(events)
        for step in trajectory.steps:
            seen = {r.source_call_id for r in step.observation.results} if step.observation else set()
            added = []
            for call in step.tool_calls or []:
                if call.tool_call_id not in seen and call.tool_call_id in outputs:
                    added.append(ObservationResult(
                        source_call_id=call.tool_call_id,
                        content=json.dumps(outputs[call.tool_call_id], ensure_ascii=False)))
            if added:
                step.observation = Observation(
                    results=[*(step.observation.results if step.observation else []), *added])
        return trajectory

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


def _raw_outputs(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Tool call id -> its last `rawOutput`, from the ACP events Harbor's runner recorded."""
    outputs: dict[str, Any] = {}
    for event in events:
        payload = event.get("payload") if event.get("event_type") == "session_update" else None
        update = payload.get("update") if isinstance(payload, dict) else None
        if (isinstance(update, dict) and isinstance(call_id := update.get("toolCallId"), str)
                and update.get("rawOutput") is not None):
            outputs[call_id] = update["rawOutput"]
    return outputs
