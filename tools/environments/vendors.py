"""Cloud sandboxes, one adapter per vendor on its official Python SDK, imported when used.

Each adapter does five things with the vendor's sync API: create (or restore) a sandbox,
exec a command (combined output and exit code), read and write a file, snapshot, terminate.
What survives a session, per vendor (`persistent = true`):
- Modal (`modal`): `Sandbox.snapshot_filesystem()` -> an image the next session starts from:
  files and installed packages persist, processes and ports do not.
- Daytona (`daytona`): the sandbox is stopped, not deleted, and started again next time: its
  disk persists; processes do not.
- Vercel Sandbox (`vercel-sandbox`): `sandbox.snapshot()` -> the next sandbox is created from
  the snapshot (kept 7 days by Vercel): files persist, processes and ports do not.
Credentials are checked before any call, with what to set when they are missing.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

from talaria.tools.errors import EnvError

EXTRAS = {"modal": ("modal", "modal"), "daytona": ("daytona", "daytona"),
          "vercel": ("vercel.sandbox", "vercel")}
"""backend -> (module to import, the `talaria-agent[extra]` that installs it)."""
DISTRIBUTION = "talaria-agent"
"""Talaria's name on the package index (`talaria` there is an unrelated project)."""
WORKDIRS = {"modal": "/workspace", "daytona": "/home/daytona/workspace",
            "vercel": "/vercel/sandbox"}
"""Where the project lives in each vendor's sandbox."""


def sdk(backend: str) -> Any:
    """The vendor's SDK module; EnvError saying how to install it when it is missing."""
    module, extra = EXTRAS[backend]
    try:
        return importlib.import_module(module)
    except ImportError:
        raise EnvError(f"the {backend} environment needs its SDK: pip install "
                       f"'{DISTRIBUTION}[{extra}]' into the environment Talaria runs from "
                       f"({sys.prefix})") from None


def check_credentials(backend: str, env: dict[str, str] | None = None) -> None:
    """EnvError when the vendor's credentials are visibly missing (before any network call)."""
    env = dict(os.environ if env is None else env)
    if backend == "modal":
        if not (env.get("MODAL_TOKEN_ID") and env.get("MODAL_TOKEN_SECRET")) and not (
                Path.home() / ".modal.toml").exists():
            raise EnvError("Modal credentials are missing: run `modal setup`, or set "
                           "MODAL_TOKEN_ID and MODAL_TOKEN_SECRET")
    elif backend == "daytona":
        if not (env.get("DAYTONA_API_KEY") or env.get("DAYTONA_JWT_TOKEN")):
            raise EnvError("Daytona credentials are missing: set DAYTONA_API_KEY (from the "
                           "Daytona dashboard)")
    elif backend == "vercel" and not env.get("VERCEL_OIDC_TOKEN") and not (
            env.get("VERCEL_TOKEN") and env.get("VERCEL_TEAM_ID") and env.get("VERCEL_PROJECT_ID")):
        raise EnvError("Vercel credentials are missing: `vercel link && vercel env pull` "
                       "(VERCEL_OIDC_TOKEN), or set VERCEL_TOKEN, VERCEL_TEAM_ID and VERCEL_PROJECT_ID")


class ModalAdapter:
    def __init__(self, settings: dict[str, Any], restore: str | None) -> None:
        modal = sdk("modal")
        app = modal.App.lookup(settings["app"], create_if_missing=True)
        image = (modal.Image.from_id(restore) if restore
                 else modal.Image.from_registry(settings["image"]))
        self.sandbox = modal.Sandbox.create(
            app=app, image=image, timeout=int(settings["timeout"]), cpu=float(settings["cpus"]),
            memory=int(settings["memory"]), workdir=WORKDIRS["modal"])

    def exec(self, argv: list[str], cwd: str | None, timeout: float) -> tuple[int | None, bytes]:
        process = self.sandbox.exec(*argv, workdir=cwd, timeout=max(1, int(timeout)))
        output = process.stdout.read() + process.stderr.read()
        process.wait()
        return process.returncode, output.encode() if isinstance(output, str) else output

    def read(self, path: str) -> bytes:
        with self.sandbox.open(path, "rb") as f:
            return bytes(f.read())

    def write(self, path: str, data: bytes) -> None:
        with self.sandbox.open(path, "wb") as f:
            f.write(data)

    def snapshot(self) -> str | None:
        return str(self.sandbox.snapshot_filesystem().object_id)

    def terminate(self) -> None:
        self.sandbox.terminate()


class DaytonaAdapter:
    def __init__(self, settings: dict[str, Any], restore: str | None) -> None:
        daytona = sdk("daytona")
        self.client = daytona.Daytona()
        if restore:
            self.sandbox = self.client.get(restore)
            self.client.start(self.sandbox)
        elif settings["image"]:
            self.sandbox = self.client.create(daytona.CreateSandboxFromImageParams(image=settings["image"]))
        else:
            self.sandbox = self.client.create()
        self.persistent = bool(settings["persistent"])

    def exec(self, argv: list[str], cwd: str | None, timeout: float) -> tuple[int | None, bytes]:
        import shlex

        response = self.sandbox.process.exec(shlex.join(argv), cwd=cwd, timeout=max(1, int(timeout)))
        return response.exit_code, str(response.result).encode()

    def read(self, path: str) -> bytes:
        return bytes(self.sandbox.fs.download_file(path))

    def write(self, path: str, data: bytes) -> None:
        self.sandbox.fs.upload_file(data, path)

    def snapshot(self) -> str | None:
        return str(self.sandbox.id)  # the sandbox itself is kept (stopped), see terminate

    def terminate(self) -> None:
        if self.persistent:
            self.client.stop(self.sandbox)
        else:
            self.client.delete(self.sandbox)


class VercelAdapter:
    def __init__(self, settings: dict[str, Any], restore: str | None) -> None:
        sandbox = sdk("vercel")
        kwargs: dict[str, Any] = {"timeout": int(settings["timeout"]) * 1000,
                                  "resources": {"vcpus": int(settings["cpus"])}}
        if restore:
            kwargs["source"] = {"type": "snapshot", "snapshot_id": restore}
        else:
            kwargs["runtime"] = settings["runtime"]
        self.sandbox = sandbox.Sandbox.create(**kwargs)

    def exec(self, argv: list[str], cwd: str | None, timeout: float) -> tuple[int | None, bytes]:
        done = self.sandbox.run_command(argv[0], argv[1:], cwd=cwd)
        output = done.stdout() + done.stderr()
        return done.exit_code, output.encode() if isinstance(output, str) else output

    def read(self, path: str) -> bytes:
        data = self.sandbox.read_file(path)
        if data is None:
            raise FileNotFoundError(path)
        return bytes(data)

    def write(self, path: str, data: bytes) -> None:
        self.sandbox.write_files([{"path": path, "content": data}])

    def snapshot(self) -> str | None:
        return str(self.sandbox.snapshot().snapshot_id)  # the sandbox stops after a snapshot

    def terminate(self) -> None:
        self.sandbox.stop()


ADAPTERS = {"modal": ModalAdapter, "daytona": DaytonaAdapter, "vercel": VercelAdapter}
