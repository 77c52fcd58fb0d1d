"""Modal, Daytona and Vercel Sandbox adapters, tested against each SDK's documented contract,
not a live service: the SDKs are stand-ins (`fake_vendors`) that record every call and run
the sandbox in a real local container. What is checked per operation: create, exec, file
read and write, snapshot, terminate; plus the errors without an SDK or credentials."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from talaria.tools.environments.base import EnvWorkspace, open_environment
from talaria.tools.environments.spec import resolve
from talaria.tools.errors import EnvError
from talaria.tools.local.workspace import LocalWorkspace
from tests.tools.environments import fake_vendors
from tests.tools.environments.test_env_tools import call

pytestmark = pytest.mark.anyio
VENDORS = ("modal", "daytona", "vercel")
CREDENTIALS = {"MODAL_TOKEN_ID": "id", "MODAL_TOKEN_SECRET": "secret",
               "DAYTONA_API_KEY": "key", "VERCEL_OIDC_TOKEN": "token"}


def workspace_for(vendor: str, project: Path, **table: object) -> EnvWorkspace:
    spec = resolve(vendor, {vendor: table} if table else {})
    env = open_environment(spec, cwd=project, session_id="cloud", home=project.parent / "home")
    return EnvWorkspace(LocalWorkspace(project), env)


@pytest.fixture
def sdks(monkeypatch: pytest.MonkeyPatch, image: str) -> Iterator[None]:
    fake_vendors.install(monkeypatch, image)
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    yield
    fake_vendors.cleanup()


@pytest.mark.parametrize("vendor", VENDORS)
async def test_without_the_sdk_the_error_says_what_to_install(
        vendor: str, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("modal", "daytona", "vercel", "vercel.sandbox"):
        monkeypatch.setitem(sys.modules, module, None)  # `import` raises ImportError
    ws = workspace_for(vendor, project)
    failed = await call(ws, "terminal", command="true")
    extra = "vercel" if vendor == "vercel" else vendor
    assert f"pip install 'talaria-agent[{extra}]'" in failed["error"]


@pytest.mark.parametrize("vendor", VENDORS)
async def test_without_credentials_the_error_says_what_to_set(
        vendor: str, project: Path, monkeypatch: pytest.MonkeyPatch, image: str) -> None:
    fake_vendors.install(monkeypatch, image)
    for name in [*CREDENTIALS, "VERCEL_TOKEN", "DAYTONA_JWT_TOKEN"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(project.parent))  # no ~/.modal.toml
    failed = await call(workspace_for(vendor, project), "terminal", command="true")
    assert "credentials are missing" in failed["error"] and "\n" not in failed["error"]
    assert fake_vendors.CALLS == []  # nothing reached the vendor


@pytest.mark.parametrize("vendor", VENDORS)
async def test_the_tools_work_in_the_sandbox_and_edits_come_back(
        vendor: str, project: Path, sdks: None) -> None:
    ws = workspace_for(vendor, project)
    try:
        seed = await call(ws, "read_file", path="seed.txt")
        assert "planted before the session" in seed["content"]
        assert "error" not in await call(ws, "write_file", path="src/new.py", content="X = 1\n")
        ran = await call(ws, "terminal", command="pwd; cat src/new.py; exit 4")
        assert ran["exit_code"] == 4 and "X = 1" in ran["output"]
        assert ran["output"].splitlines()[0] == str(project)  # shown as the project's path
        found = await call(ws, "search_files", pattern="X = ")
        assert [m["path"] for m in found["matches"]] == ["src/new.py"]
        moved = await call(ws, "terminal", command="cd src && export V='a b'")
        assert moved["cwd"] == str(project / "src")  # the shell's state rides on the output
        here = await call(ws, "terminal", command='pwd; echo "$V"')
        assert here["output"] == f"{project / 'src'}\na b\n"
        bg = await call(ws, "terminal", background=True, command='echo "bg in $(pwd) $V"; sleep 300')
        with anyio.fail_after(30):
            while "bg in" not in (log := await call(ws, "process", action="log",
                                                    session_id=bg["session_id"]))["output"]:
                await anyio.sleep(0.2)
        assert log["output"] == f"bg in {project / 'src'} a b"  # the project's paths
        assert (await call(ws, "process", action="kill", session_id=bg["session_id"]))["status"] == "killed"
        slow = await call(ws, "terminal", command="sleep 30", timeout=1)
        assert slow["timed_out"]
        missing = await call(ws, "read_file", path="nope.txt")
        assert "error" in missing
        assert not (project / "src" / "new.py").exists()
    finally:
        ws.close()
    assert (project / "src" / "new.py").read_text() == "X = 1\n"
    names = [c[0] for c in fake_vendors.CALLS]
    terminate = {"modal": "modal.Sandbox.terminate", "daytona": "daytona.delete",
                 "vercel": "vercel.stop"}[vendor]
    assert names[-1] == terminate


async def test_modal_contract_create_and_persistence_by_snapshot(project: Path, sdks: None) -> None:
    first = workspace_for("modal", project, persistent=True, cpus=1, memory=512, timeout=600)
    try:
        await call(first, "terminal", command="mkdir -p /opt && echo kept > /opt/pkg")
    finally:
        first.close()
    create = next(c for c in fake_vendors.CALLS if c[0] == "modal.Sandbox.create")
    assert create[2]["image"] == "python:3.12-slim" and create[2]["cpu"] == 1.0
    assert create[2]["memory"] == 512 and create[2]["timeout"] == 600
    assert create[2]["workdir"] == "/workspace"
    assert ("modal.Sandbox.snapshot_filesystem", (), {}) in fake_vendors.CALLS
    second = workspace_for("modal", project, persistent=True)
    try:
        seen = await call(second, "terminal", command="cat /opt/pkg")
        assert seen["output"].strip() == "kept"
        assert any(c[0] == "modal.Image.from_id" for c in fake_vendors.CALLS)
    finally:
        second.close()


async def test_daytona_persistent_stops_and_restarts_the_same_sandbox(project: Path, sdks: None) -> None:
    first = workspace_for("daytona", project, persistent=True)
    try:
        await call(first, "terminal", command="echo kept > /root/state")
    finally:
        first.close()
    assert any(c[0] == "daytona.stop" for c in fake_vendors.CALLS)
    second = workspace_for("daytona", project, persistent=True)
    try:
        assert (await call(second, "terminal", command="cat /root/state"))["output"].strip() == "kept"
        assert [c[0] for c in fake_vendors.CALLS if c[0] in ("daytona.get", "daytona.start")] == [
            "daytona.get", "daytona.start"]
    finally:
        second.close()
        for sandbox in fake_vendors.Daytona.sandboxes.values():
            sandbox.box.remove()


async def test_vercel_persistent_restores_from_its_snapshot(project: Path, sdks: None) -> None:
    first = workspace_for("vercel", project, persistent=True)
    try:
        await call(first, "terminal", command="echo kept > /root/state")
    finally:
        first.close()
    second = workspace_for("vercel", project, persistent=True)
    try:
        assert (await call(second, "terminal", command="cat /root/state"))["output"].strip() == "kept"
        creates = [c[2] for c in fake_vendors.CALLS if c[0] == "vercel.Sandbox.create"]
        assert creates[0]["runtime"] == "python3.13" and "source" not in creates[0]
        assert creates[1]["source"]["type"] == "snapshot"
    finally:
        second.close()


def test_an_unknown_key_or_a_wrong_type_is_one_line() -> None:
    with pytest.raises(EnvError, match=r"\[environments.modal\] unknown key 'gpus'"):
        resolve("modal", {"modal": {"gpus": 1}})
    with pytest.raises(EnvError, match=r"\[environments.vercel\] cpus must be an integer"):
        resolve("vercel", {"vercel": {"cpus": "two"}})
