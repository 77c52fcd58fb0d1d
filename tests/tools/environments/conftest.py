"""Environments for the tests: local, a real container (podman, a local image) and a real
sshd on loopback. A backend that cannot run here is skipped with the reason by name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks import env_image
from benchmarks.env_sshd import Sshd
from benchmarks.env_sshd import missing as sshd_missing
from talaria.tools.environments.base import EnvWorkspace, open_environment
from talaria.tools.environments.spec import resolve
from talaria.tools.local.workspace import LocalWorkspace

BACKENDS = ("local", "docker", "ssh")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def image() -> str:
    why = env_image.missing()
    if why:
        pytest.skip(f"docker environment: no real engine here ({why})")
    return env_image.ensure_image()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    why = sshd_missing()
    if why:
        pytest.skip(f"ssh environment: no real sshd here ({why})")
    with Sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


def tables(backend: str, request: pytest.FixtureRequest, tmp_path: Path, **more: Any) -> dict[str, Any]:
    """`[environments.NAME]` tables that make `backend` real here."""
    if backend == "docker":
        return {"docker": {"image": request.getfixturevalue("image"), **more}}
    if backend == "ssh":
        server = request.getfixturevalue("sshd")
        return {"ssh": server.table(workdir=tmp_path / "remote", **more)}
    return {}


def make_workspace(backend: str, request: pytest.FixtureRequest, project: Path,
                   session_id: str = "test-session", extra: tuple[Path, ...] = (),
                   **more: Any) -> EnvWorkspace:
    """`extra`: the session's additional directories."""
    spec = resolve(backend, tables(backend, request, project.parent, **more))
    env = open_environment(spec, cwd=project, session_id=session_id, home=project.parent / "home",
                           extra=extra)
    return EnvWorkspace(LocalWorkspace(project, (project, *extra)), env)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    (path / "seed.txt").write_text("planted before the session\n")
    return path


@pytest.fixture(params=BACKENDS)
def workspace(request: pytest.FixtureRequest, project: Path) -> Iterator[EnvWorkspace]:
    """A session's workspace on each backend, not started (the first call starts it)."""
    ws = make_workspace(request.param, request, project,
                        session_id=f"t{abs(hash(request.node.nodeid)) % 10**12}")
    try:
        yield ws
    finally:
        ws.close()
