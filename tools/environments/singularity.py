"""Singularity / Apptainer: the session's commands inside an HPC image, project bound.

One `apptainer exec` runs the environment helper for the whole session (no daemon, no
instance to clean up: when the helper's stdin closes, it and everything it started exit).
The project (and each additional directory of the session) is bound at its own path, so
files are the door's files, as with docker. The
image is a SIF file or a sandbox directory; `overlay` (an overlay image or directory) keeps
what commands install across sessions, else a throwaway `--writable-tmpfs` layer takes their
writes. Network: the host's unless `network = false` (`--net --network none`, which needs a
site that allows it).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path, PurePosixPath

from talaria.tools.environments.mux import BOOT_ARGV, Mux
from talaria.tools.environments.remote import HelperCommands, PathMap, SplitWorkspace
from talaria.tools.environments.spec import EnvSpec
from talaria.tools.errors import EnvError
from talaria.tools.workspace import Workspace

BINARIES = ("apptainer", "singularity")


def find_binary(preferred: str | None) -> str:
    for name in (preferred,) if preferred else BINARIES:
        path = shutil.which(name or "")
        if path:
            return path
    raise EnvError(f"{preferred or 'apptainer or singularity'} is not on PATH; load its module "
                   "(`module load apptainer`) or install it, or use another environment")


class SingularityEnvironment:
    shares_files = True

    def __init__(self, spec: EnvSpec, *, cwd: Path, session_id: str,
                 extra: tuple[Path, ...] = ()) -> None:
        self.spec = spec
        self.cwd = cwd
        self.extra = extra
        """The session's additional directories: bound at their own paths too."""
        self.settings = spec.settings
        if not self.settings["image"]:
            raise EnvError("singularity needs an image: --env singularity:IMAGE.sif, or "
                           "image = \"...\" in [environments.singularity]")
        self.mux: Mux | None = None
        self.binary: str | None = None

    @property
    def where(self) -> str:
        return f"{Path(self.binary or 'apptainer').name} image {self.settings['image']}"

    def exec_argv(self, binary: str) -> list[str]:
        """The `exec` that runs the helper in the image."""
        s = self.settings
        argv = [binary, "exec", "--bind", f"{self.cwd}:{self.cwd}", "--pwd", str(self.cwd)]
        for directory in self.extra:
            argv += ["--bind", f"{directory}:{directory}"]
        if s["overlay"]:
            argv += ["--overlay", os.path.expanduser(str(s["overlay"]))]
        else:
            argv += ["--writable-tmpfs"]
        if not s["network"]:
            argv += ["--net", "--network", "none"]
        return [*argv, os.path.expanduser(str(s["image"])), *BOOT_ARGV]

    async def start(self, base: Workspace) -> Workspace:
        if self.mux is None or self.mux.lost:
            binary = self.binary = find_binary(self.settings["binary"])
            image = Path(os.path.expanduser(str(self.settings["image"])))
            if "://" not in str(self.settings["image"]) and not image.exists():
                raise EnvError(f"image {image} not found (a .sif file or a sandbox directory)")
            self.mux = await Mux.open(self.exec_argv(binary), self.where)
        return SplitWorkspace(base, HelperCommands(self.mux, PathMap(self.cwd, PurePosixPath(self.cwd))))

    def close(self) -> None:
        mux, self.mux = self.mux, None
        if mux is not None:
            mux.close()
