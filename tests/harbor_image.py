"""A local base image for Harbor tasks in the tests: what `python:3.12-slim` gives the sample
tasks, made offline from this machine's own files (no registry here).

`benchmarks/env_image.py`'s rootfs (static busybox, Debian's python3.11 and its standard
library) plus what Harbor and an installed Talaria need in a task container: bash (Harbor runs
every command with `bash -c`), stdbuf (its ACP runner's output pipe), `/usr/bin/env` (the
launcher's shebang), the shared libraries of the standard library's extension modules
(sqlite3, ssl, ctypes...) and the system libraries manylinux wheels may link (libstdc++,
librt...).
`podman import`ed once per content: `ensure_image()` returns its name.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from benchmarks import env_image

REPO = "localhost/talaria-harbor-base"
TOOLS = (Path("/usr/bin/bash"), Path("/usr/bin/stdbuf"))
EXTRA_FILES = (Path("/usr/libexec/coreutils/libstdbuf.so"),)
RUNTIME_LIBS = ("libstdc++.so.6", "libgcc_s.so.1", "libdl.so.2", "librt.so.1", "libpthread.so.0",
                "libutil.so.1", "libresolv.so.2", "libz.so.1")
"""The system libraries manylinux wheels may link (its policy's list, as glibc ships them)."""
LIB_DIRS = (Path("/usr/lib/x86_64-linux-gnu"), Path("/lib/x86_64-linux-gnu"))
DYNLOAD = Path("/usr/lib/python3.11/lib-dynload")


def missing() -> str | None:
    """Why the image cannot be built here, or None."""
    if why := env_image.missing():
        return why
    for path in (*TOOLS, *EXTRA_FILES, DYNLOAD):
        if not path.exists():
            return f"{path} is missing"
    for lib in RUNTIME_LIBS:
        if not any((d / lib).exists() for d in LIB_DIRS):
            return f"{lib} is missing"
    return None


def _tag() -> str:
    digest = hashlib.sha256()
    for path in (*TOOLS, env_image.PYTHON, env_image.BUSYBOX, Path(env_image.__file__),
                 Path(__file__)):
        digest.update(f"{path}:{path.stat().st_mtime_ns}".encode())
    return f"{REPO}:{digest.hexdigest()[:12]}"


def _copy(root: Path, path: Path) -> None:
    target = root / path.relative_to("/")
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path.resolve(), target)


def build_rootfs(root: Path) -> None:
    env_image.build_rootfs(root, python=True)
    binaries = [*TOOLS, *sorted(DYNLOAD.glob("*.so"))]
    for binary in binaries:
        if binary.parent != DYNLOAD:
            _copy(root, binary)
        for lib in env_image._libs(binary):
            _copy(root, lib)
    for path in EXTRA_FILES:
        _copy(root, path)
    for name in RUNTIME_LIBS:
        found = next(d / name for d in LIB_DIRS if (d / name).exists())
        _copy(root, found)
    (root / "usr" / "bin" / "env").symlink_to("/bin/busybox")


def ensure_image() -> str:
    """The image's name, importing it into podman when it is not there yet."""
    tag = _tag()
    if subprocess.run(["podman", "image", "exists", tag]).returncode == 0:
        return tag
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "rootfs"
        build_rootfs(root)
        tarball = Path(tmp) / "rootfs.tar"
        with tarfile.open(tarball, "w") as tar:
            tar.add(root, arcname=".")
        subprocess.run(["podman", "import", "--quiet", str(tarball), tag], check=True,
                       capture_output=True)
    return tag
