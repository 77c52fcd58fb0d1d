"""Path policy, in one place: resolving what the model wrote, root containment, sensitivity.

`resolve` is purely lexical and never raises (the dispatcher calls it on raw model input);
`inside_roots` and `is_sensitive` follow symlinks, because a link inside the project that
points at `/etc` or `~/.ssh` must be judged by where it lands, not where it sits.
"""

from __future__ import annotations

import os
from pathlib import Path

SENSITIVE_HOME_DIRS = (".ssh", ".aws", ".gnupg")
SENSITIVE_NAMES = frozenset(
    {
        "id_rsa",
        "id_dsa",
        "id_ecdsa",
        "id_ed25519",
        "id_ecdsa_sk",
        "id_ed25519_sk",
        ".netrc",
        ".pgpass",
    }
)
SENSITIVE_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore")
# `.env.example` and friends are committed templates, not secrets: asking for them is noise.
ENV_TEMPLATE_SUFFIXES = (".example", ".sample", ".template", ".dist")


def resolve(raw: str, cwd: Path) -> Path:
    """`raw` as a normalised absolute path: `~` expanded, relative paths taken from `cwd`.
    Lexical only (symlinks untouched), so it works for files that do not exist yet."""
    path = Path(os.path.expanduser(raw.strip()))
    if not path.is_absolute():
        path = cwd / path
    return Path(os.path.normpath(path))


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def inside_roots(path: Path, roots: tuple[Path, ...] | list[Path]) -> bool:
    """True when `path`, with every symlink resolved, is one of `roots` or below one."""
    try:
        real = _real(path)
        for root in roots:
            r = _real(root)
            if real == r or r in real.parents:
                return True
    except (OSError, ValueError):  # e.g. an embedded NUL byte: not inside anything
        pass
    return False


def _sensitive(path: Path, home: Path) -> bool:
    parts = path.parts
    if ".git" in parts[:-1] or path.name == ".git":
        return True
    name = path.name
    if name == ".env" or (name.startswith(".env.") and not name.endswith(ENV_TEMPLATE_SUFFIXES)):
        return True
    if name in SENSITIVE_NAMES or name.endswith(SENSITIVE_SUFFIXES):
        return True
    for d in SENSITIVE_HOME_DIRS:
        base = home / d
        if path == base or base in path.parents:
            return True
    return False


def is_sensitive(path: Path, home: Path) -> bool:
    """Secrets and repository internals: `.git/` internals, `.env` / `.env.*` (not
    templates such as `.env.example`), `~/.ssh`, `~/.aws`, `~/.gnupg`, private keys.
    Checked on the path as written and on its symlink target."""
    try:
        path = Path(os.path.normpath(path))
        return _sensitive(path, home) or _sensitive(_real(path), _real(home))
    except (OSError, ValueError):
        return False


def display(path: Path, cwd: Path) -> str:
    """How a path is shown to the model: relative to `cwd` when below it, else absolute."""
    try:
        rel = path.relative_to(cwd)
    except ValueError:
        return str(path)
    return str(rel) if rel.parts else "."
