"""A session's additional directories in its environment: mounted at their own paths where the
project is mounted (local, a real container; singularity binds them the same way), refused by
name where the project is copied elsewhere (ssh, cloud)."""

from __future__ import annotations

from pathlib import Path

import pytest

from talaria.tools.environments.base import open_environment
from talaria.tools.environments.singularity import SingularityEnvironment
from talaria.tools.environments.spec import resolve
from talaria.tools.errors import EnvError
from tests.tools.environments.conftest import make_workspace
from tests.tools.environments.test_env_tools import call

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("backend", ["local", "docker"])
async def test_commands_write_additional_directories_at_their_paths(
        request: pytest.FixtureRequest, project: Path, backend: str) -> None:
    lib = project.parent / "lib"
    lib.mkdir()
    (lib / "seed.txt").write_text("planted in lib\n")
    ws = make_workspace(backend, request, project, session_id=f"extra-{backend}", extra=(lib,))
    try:
        ran = await call(ws, "terminal", command=f"cat {lib}/seed.txt && echo made > {lib}/out.txt")
        assert ran["exit_code"] == 0 and "planted in lib" in ran["output"], ran
        found = await call(ws, "search_files", pattern="planted", path=str(lib))
        assert [m["path"] for m in found["matches"]] == [str(lib / "seed.txt")]
    finally:
        ws.close()
    assert (lib / "out.txt").read_text() == "made\n"


def test_singularity_binds_each_additional_directory(tmp_path: Path) -> None:
    spec = resolve("singularity:image.sif", {})
    env = SingularityEnvironment(spec, cwd=tmp_path / "p", session_id="s",
                                 extra=(tmp_path / "a", tmp_path / "b"))
    argv = env.exec_argv("apptainer")
    binds = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--bind"]
    assert binds == [f"{d}:{d}" for d in (tmp_path / "p", tmp_path / "a", tmp_path / "b")]


@pytest.mark.parametrize("name", ["ssh:build-host", "modal"])
def test_environments_that_copy_the_project_refuse_them_by_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(EnvError) as caught:
        open_environment(resolve(name, {}), cwd=tmp_path / "p", session_id="s", home=tmp_path,
                         extra=(tmp_path / "shared",))
    assert f"not the additional directory {tmp_path / 'shared'}" in str(caught.value)
    assert "use local, docker or singularity" in str(caught.value)
