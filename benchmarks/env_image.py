"""A small local container image for the docker environment's tests and benchmarks.

No registry here: the image is `podman import`ed from a rootfs this module makes out of the
machine's own static busybox and Debian python3 (binary, its shared libraries, the standard
library without tests). Built once per content hash; `ensure_image()` returns its name.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

PYTHON = Path("/usr/bin/python3.11")
BUSYBOX = Path("/bin/busybox")
SKIP = {"test", "idlelib", "tkinter", "ensurepip", "lib2to3", "pydoc_data", "turtledemo",
        "__pycache__", "site-packages", "dist-packages", "config-3.11-x86_64-linux-gnu"}
REPO = "localhost/talaria-test"


def missing() -> str | None:
    """Why the image cannot be built here, or None."""
    if not shutil.which("podman"):
        return "podman is not installed"
    for path in (PYTHON, BUSYBOX):
        if not path.exists():
            return f"{path} is missing (apt-get install busybox-static python3-minimal)"
    return None


def _libs(binary: Path) -> list[Path]:
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split()
        for part in parts:
            if part.startswith("/"):
                libs.append(Path(part))
    return libs


def _tag() -> str:
    digest = hashlib.sha256()
    for path in (PYTHON, BUSYBOX, Path(__file__)):
        digest.update(str(path.stat().st_mtime_ns).encode())
    return f"{REPO}:{digest.hexdigest()[:12]}"


def build_rootfs(root: Path, *, python: bool = True) -> None:
    (root / "bin").mkdir(parents=True)
    shutil.copy2(BUSYBOX, root / "bin" / "busybox")
    applets = subprocess.run([str(BUSYBOX), "--list"], capture_output=True, text=True).stdout.split()
    for applet in applets:
        if applet != "busybox":
            os.symlink("busybox", root / "bin" / applet)
    _skeleton(root)
    if not python:
        return
    (root / "usr" / "bin").mkdir(parents=True)
    shutil.copy2(PYTHON, root / "usr" / "bin" / "python3")
    for lib in _libs(PYTHON):
        target = root / lib.relative_to("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(lib.resolve(), target)
    stdlib = Path("/usr/lib/python3.11")
    shutil.copytree(stdlib, root / "usr/lib/python3.11", symlinks=True,
                    ignore=lambda d, names: [n for n in names if n in SKIP])


def _skeleton(root: Path) -> None:
    for d in ("tmp", "root", "etc", "proc", "sys", "dev"):
        (root / d).mkdir(exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")


def ensure_image(*, python: bool = True) -> str:
    """The test image's name, importing it into podman when it is not there yet. Without
    `python`: busybox only (an image the environment helper cannot run in)."""
    tag = _tag() + ("" if python else "-nopython")
    if subprocess.run(["podman", "image", "exists", tag]).returncode == 0:
        return tag
    # The suite's parallel workers may all want it first: one imports, the others wait.
    with open(Path(tempfile.gettempdir()) / f"talaria-image-{os.getuid()}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if subprocess.run(["podman", "image", "exists", tag]).returncode != 0:
            _import(tag, python)
    return tag


def _import(tag: str, python: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "rootfs"
        build_rootfs(root, python=python)
        tarball = Path(tmp) / "rootfs.tar"
        with tarfile.open(tarball, "w") as tar:
            tar.add(root, arcname=".")
        subprocess.run(["podman", "import", "--quiet", str(tarball), tag], check=True,
                       capture_output=True)


if __name__ == "__main__":
    print(ensure_image())
