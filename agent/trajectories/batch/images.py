"""Container images of Harbor tasks: `environment/Dockerfile` built with podman (or docker),
once per content.

    tag = ensure_image(Path("task/environment"), timeout=600)   # localhost/talaria-task:<hash>

The tag is a hash of the build context (every file's path, mode and bytes), so an unchanged
environment is never built twice, across tasks, runs and `--resume`, and a changed one always
is. The build runs on this machine: on a Ray cluster each node needs the image (or give the
tasks a `docker_image` every node has).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

REPOSITORY = "localhost/talaria-task"
DEFAULT_BUILD_TIMEOUT_S = 600.0
"""Harbor's default `build_timeout_sec`."""
HASH_CHARS = 16
BUILD_LOG_TAIL = 600


class ImageError(Exception):
    """An image could not be built; one line with the cause and the build's last output."""


def context_hash(directory: Path) -> str:
    """A digest of everything a build reads from `directory`."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            digest.update(str(path.relative_to(directory)).encode() + b"\0")
            digest.update(oct(path.lstat().st_mode).encode() + b"\0")
            digest.update(os.readlink(path).encode() if path.is_symlink() else path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()[:HASH_CHARS]


def ensure_image(context: Path, *, timeout: float = DEFAULT_BUILD_TIMEOUT_S,
                 engine: str | None = None) -> str:
    """The tag of `context`'s image, built now unless it exists. Raises ImageError."""
    from talaria.tools.environments.docker import engine_run, find_engine, last_line
    from talaria.tools.errors import EnvError

    tag = f"{REPOSITORY}:{context_hash(context)}"
    try:
        binary = find_engine(engine)
        if engine_run([binary, "image", "inspect", tag]).returncode == 0:
            return tag
        built = engine_run([binary, "build", "-q", "-t", tag, "-f", str(context / "Dockerfile"),
                            str(context)], timeout=timeout)
    except EnvError as exc:
        raise ImageError(f"{context / 'Dockerfile'}: {exc}") from None
    if built.returncode != 0:
        raise ImageError(f"{context / 'Dockerfile'}: the build failed: "
                         f"{last_line(built.stderr or built.stdout)[-BUILD_LOG_TAIL:]}")
    return tag
