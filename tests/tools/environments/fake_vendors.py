"""Stand-ins for the Modal, Daytona and Vercel Sandbox SDKs, with the call signatures their
documentation gives, backed by a real local podman container (the vendor's machine). Every
call is recorded in `CALLS` for the contract tests. Installed with `install(monkeypatch, image)`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from typing import Any

CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
COMMITTED: list[str] = []
"""Images made by snapshots, removed by `cleanup()`."""
IMAGE = {"name": ""}
"""The local image every sandbox starts from (registry tags cannot be pulled here)."""


def record(name: str, *args: Any, **kwargs: Any) -> None:
    CALLS.append((name, args, kwargs))


PREFIX = f"talaria-fakevendor-{os.getpid()}-"
"""This process's sandbox containers (the suite's parallel workers each have their own)."""


class Box:
    """One container: the sandbox's machine."""

    count = 0

    def __init__(self, image: str | None = None) -> None:
        Box.count += 1
        self.name = f"{PREFIX}{Box.count}-{id(self) % 10**6}"
        subprocess.run(["podman", "run", "-d", "--name", self.name, "--network", "none",
                        "--entrypoint", "/bin/sh", image or IMAGE["name"], "-c",
                        "while :; do sleep 86400 & wait $!; done"], check=True, capture_output=True)

    def exec(self, argv: list[str], cwd: str | None = None) -> tuple[int, bytes, bytes]:
        where = ["-w", cwd] if cwd else []
        done = subprocess.run(["podman", "exec", *where, self.name, *argv], capture_output=True)
        return done.returncode, done.stdout, done.stderr

    def read(self, path: str) -> bytes:
        code, out, err = self.exec(["cat", path])
        if code != 0:
            raise FileNotFoundError(path)
        return out

    def write(self, path: str, data: bytes) -> None:
        subprocess.run(["podman", "exec", "-i", self.name, "sh", "-c", f"cat > '{path}'"],
                       input=data, check=True, capture_output=True)

    def commit(self) -> str:
        image = subprocess.run(["podman", "commit", "-q", self.name], capture_output=True,
                               text=True, check=True).stdout.strip()
        COMMITTED.append(image)
        return image

    def remove(self) -> None:
        subprocess.run(["podman", "rm", "-f", "-t", "0", self.name], capture_output=True)


# -- modal --------------------------------------------------------------------------------

class _Stream:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self) -> str:
        return self.data.decode()


class _Process:
    def __init__(self, code: int, out: bytes, err: bytes) -> None:
        self.returncode = code
        self.stdout, self.stderr = _Stream(out), _Stream(err)

    def wait(self) -> int:
        return self.returncode


class _ModalFile:
    def __init__(self, box: Box, path: str, mode: str) -> None:
        self.box, self.path, self.mode, self.buf = box, path, mode, b""

    def __enter__(self) -> _ModalFile:
        return self

    def __exit__(self, *exc: object) -> None:
        if "w" in self.mode:
            self.box.write(self.path, self.buf)

    def read(self) -> bytes:
        return self.box.read(self.path)

    def write(self, data: bytes) -> None:
        self.buf += data


class ModalImage:
    def __init__(self, ref: str, local: str | None = None) -> None:
        self.object_id, self.local = ref, local

    @staticmethod
    def from_registry(tag: str) -> ModalImage:
        record("modal.Image.from_registry", tag)
        return ModalImage(tag)

    @staticmethod
    def from_id(image_id: str) -> ModalImage:
        record("modal.Image.from_id", image_id)
        return ModalImage(image_id, local=image_id)


class ModalApp:
    @staticmethod
    def lookup(name: str, create_if_missing: bool = False) -> ModalApp:
        record("modal.App.lookup", name, create_if_missing=create_if_missing)
        return ModalApp()


class ModalSandbox:
    @staticmethod
    def create(*args: str, app: Any = None, image: Any = None, timeout: int = 300,
               cpu: float | None = None, memory: int | None = None, workdir: str | None = None,
               **rest: Any) -> ModalSandbox:
        record("modal.Sandbox.create", app=app, image=image.object_id, timeout=timeout, cpu=cpu,
               memory=memory, workdir=workdir)
        sandbox = ModalSandbox()
        sandbox.box = Box(image.local)
        return sandbox

    box: Box

    def exec(self, *argv: str, workdir: str | None = None, timeout: int | None = None) -> _Process:
        record("modal.Sandbox.exec", *argv, workdir=workdir, timeout=timeout)
        return _Process(*self.box.exec(list(argv), workdir))

    def open(self, path: str, mode: str = "r") -> _ModalFile:
        record("modal.Sandbox.open", path, mode)
        return _ModalFile(self.box, path, mode)

    def snapshot_filesystem(self) -> ModalImage:
        record("modal.Sandbox.snapshot_filesystem")
        image_id = self.box.commit()
        return ModalImage(image_id, local=image_id)

    def terminate(self) -> None:
        record("modal.Sandbox.terminate")
        self.box.remove()


# -- daytona ------------------------------------------------------------------------------

class _Response:
    def __init__(self, exit_code: int, result: str) -> None:
        self.exit_code, self.result = exit_code, result


class _DaytonaSandbox:
    def __init__(self) -> None:
        self.box = Box()
        self.id = self.box.name
        outer = self

        class Process:
            def exec(self, command: str, cwd: str | None = None, timeout: int | None = None) -> _Response:
                record("daytona.process.exec", command, cwd=cwd, timeout=timeout)
                code, out, err = outer.box.exec(["sh", "-c", command], cwd)
                return _Response(code, (out + err).decode())

        class Fs:
            def upload_file(self, data: bytes, path: str) -> None:
                record("daytona.fs.upload_file", path)
                outer.box.write(path, data)

            def download_file(self, path: str) -> bytes:
                record("daytona.fs.download_file", path)
                return outer.box.read(path)

        self.process, self.fs = Process(), Fs()


class Daytona:
    sandboxes: dict[str, _DaytonaSandbox] = {}

    def create(self, params: Any = None) -> _DaytonaSandbox:
        record("daytona.create", getattr(params, "image", None))
        sandbox = _DaytonaSandbox()
        Daytona.sandboxes[sandbox.id] = sandbox
        return sandbox

    def get(self, sandbox_id: str) -> _DaytonaSandbox:
        record("daytona.get", sandbox_id)
        return Daytona.sandboxes[sandbox_id]

    def start(self, sandbox: _DaytonaSandbox) -> None:
        record("daytona.start", sandbox.id)
        subprocess.run(["podman", "start", sandbox.box.name], capture_output=True)

    def stop(self, sandbox: _DaytonaSandbox) -> None:
        record("daytona.stop", sandbox.id)
        subprocess.run(["podman", "stop", "-t", "0", sandbox.box.name], capture_output=True)

    def delete(self, sandbox: _DaytonaSandbox) -> None:
        record("daytona.delete", sandbox.id)
        sandbox.box.remove()


class CreateSandboxFromImageParams:
    def __init__(self, image: str) -> None:
        self.image = image


# -- vercel -------------------------------------------------------------------------------

class _Finished:
    def __init__(self, code: int, out: bytes, err: bytes) -> None:
        self.exit_code, self._out, self._err = code, out, err

    def stdout(self) -> str:
        return self._out.decode()

    def stderr(self) -> str:
        return self._err.decode()


class _Snapshot:
    def __init__(self, snapshot_id: str) -> None:
        self.snapshot_id = snapshot_id


class VercelSandbox:
    box: Box

    @staticmethod
    def create(**kwargs: Any) -> VercelSandbox:
        record("vercel.Sandbox.create", **kwargs)
        sandbox = VercelSandbox()
        source = kwargs.get("source") or {}
        sandbox.box = Box(source.get("snapshot_id"))
        return sandbox

    def run_command(self, cmd: str, args: list[str], cwd: str | None = None) -> _Finished:
        record("vercel.run_command", cmd, args, cwd=cwd)
        return _Finished(*self.box.exec([cmd, *args], cwd))

    def read_file(self, path: str) -> bytes | None:
        record("vercel.read_file", path)
        try:
            return self.box.read(path)
        except FileNotFoundError:
            return None

    def write_files(self, files: list[dict[str, Any]]) -> None:
        record("vercel.write_files", [f["path"] for f in files])
        for f in files:
            self.box.write(f["path"], f["content"])

    def snapshot(self) -> _Snapshot:
        record("vercel.snapshot")
        return _Snapshot(self.box.commit())

    def stop(self) -> None:
        record("vercel.stop")
        self.box.remove()


def install(monkeypatch: Any, image: str) -> None:
    """Put the stand-ins where `import modal`, `import daytona`, `import vercel.sandbox` look."""
    IMAGE["name"] = image
    CALLS.clear()
    modal = types.ModuleType("modal")
    modal.App, modal.Image, modal.Sandbox = ModalApp, ModalImage, ModalSandbox  # type: ignore[attr-defined]
    daytona = types.ModuleType("daytona")
    daytona.Daytona, daytona.CreateSandboxFromImageParams = Daytona, CreateSandboxFromImageParams  # type: ignore[attr-defined]
    vercel = types.ModuleType("vercel")
    sandbox = types.ModuleType("vercel.sandbox")
    sandbox.Sandbox = VercelSandbox  # type: ignore[attr-defined]
    vercel.sandbox = sandbox  # type: ignore[attr-defined]
    for name, module in (("modal", modal), ("daytona", daytona), ("vercel", vercel),
                         ("vercel.sandbox", sandbox)):
        monkeypatch.setitem(sys.modules, name, module)


def cleanup() -> None:
    """Remove the snapshots' images and any sandbox container of this process left."""
    names = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True,
                           text=True).stdout.split()
    left = [n for n in names if n.startswith(PREFIX)]
    if left:
        subprocess.run(["podman", "rm", "-f", "-t", "0", *left], capture_output=True)
    if COMMITTED:
        subprocess.run(["podman", "rmi", "-f", *COMMITTED], capture_output=True)
        COMMITTED.clear()
