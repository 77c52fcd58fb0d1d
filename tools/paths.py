"""Path policy, in one place: resolving what the model wrote, root containment, sensitivity.

`resolve` is purely lexical and never raises (the dispatcher calls it on raw model input);
`inside_roots` and `Sensitive` follow symlinks, because a link inside the project that
points at `/etc` or `~/.ssh` must be judged by where it lands, not where it sits.

Sensitive paths (the README lists them; `sensitive_paths` in config.toml adds globs):
- secrets, whose *reading* asks: private keys, `.ssh/` and `.gnupg/` anywhere, `.env` and
  `.env*` (not templates such as `.env.example`), `.netrc`, `.pgpass`, `.git-credentials`,
  `.npmrc` / `.pypirc` holding a token or password, `$TALARIA_HOME/credentials` and
  `$TALARIA_HOME/sessions.db` (every project's transcripts), the cloud
  CLIs' stores in `$HOME` (`HOME_SECRETS`), and `.git/config` (remote URLs carry tokens);
- repository internals, whose *writing* also asks: everything under `.git/` (hooks run code).
"""

from __future__ import annotations

import glob
import itertools
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from talaria.tools.registry import WEB_SCHEMES

HOME_SECRETS = (".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".config/gh", ".kube",
                ".docker/config.json")
"""Credential stores relative to $HOME: everything in them is a secret."""
SECRET_DIRS = frozenset({".ssh", ".gnupg"})
"""Directory names that hold secrets wherever they are."""
SECRET_NAMES = frozenset({
    "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk",
    ".netrc", "_netrc", ".pgpass", ".git-credentials",
})
SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore")
# `.env.example` and friends are committed templates, not secrets: asking for them is noise.
ENV_TEMPLATE_SUFFIXES = (".example", ".sample", ".template", ".dist")
TOKEN_FILES = frozenset({".npmrc", ".pypirc"})
"""Package-manager configs: secret when they hold a credential (`TOKEN_MARKERS`)."""
TOKEN_MARKERS = (b"_auth", b"token", b"password")
TOKEN_SNIFF_BYTES = 64 * 1024
STORE_NAME = "sessions.db"
"""The session store in $TALARIA_HOME (and its -wal / -shm files): every project's
transcripts, the content of secret reads included."""
MAX_HIDDEN_GLOB_MATCHES = 256
"""Paths one absolute `sensitive_paths` glob may add to the sandbox's hidden list."""
MAX_ADDITIONAL_DIRS = 32
"""Directories a session may add to its project (each is mounted in sandboxes and containers
and has its own checkpoint repository)."""


def resolve(raw: str, cwd: Path) -> Path:
    """`raw` as a normalised absolute path: `~` expanded, relative paths taken from `cwd`.
    Lexical only (symlinks untouched), so it works for files that do not exist yet."""
    path = Path(os.path.expanduser(raw.strip()))
    if not path.is_absolute():
        path = cwd / path
    return Path(os.path.normpath(path))


URL_PREFIXES = (*WEB_SCHEMES, "data:")
"""What a path argument that may hold a URL (`ToolSpec.url_args`) holds when it is no path."""


def additional_dirs(cwd: Path, raw: Sequence[str]) -> tuple[Path, ...]:
    """A session's additional directories (ACP `additionalDirectories`, `--add-dir`): more
    roots of its project beside `cwd`, in order, normalised, without repeats or `cwd` itself.
    ValueError naming the first entry that is not an absolute path to a readable directory,
    or when there are more than `MAX_ADDITIONAL_DIRS`."""
    if len(raw) > MAX_ADDITIONAL_DIRS:
        raise ValueError(f"{len(raw)} additional directories: at most {MAX_ADDITIONAL_DIRS}")
    found: dict[Path, None] = {}
    for entry in raw:
        shown = repr(entry) if len(entry) <= 120 else repr(entry[:117]) + "..."
        if "\x00" in entry or not os.path.isabs(entry):
            raise ValueError(f"additional directory {shown} is not an absolute path")
        path = Path(os.path.normpath(entry))
        try:
            is_dir = stat.S_ISDIR(os.stat(path).st_mode)
        except FileNotFoundError:
            raise ValueError(f"additional directory {shown} does not exist") from None
        except OSError as exc:  # permission denied on a parent, a loop of symlinks...
            raise ValueError(f"additional directory {shown} cannot be used: {exc.strerror}") from None
        if not is_dir:
            raise ValueError(f"additional directory {shown} is not a directory")
        if not os.access(path, os.R_OK | os.X_OK):
            raise ValueError(f"additional directory {shown} cannot be read (permission denied)")
        if path != Path(os.path.normpath(cwd)):
            found[path] = None
    return tuple(found)


def is_url(raw: str) -> bool:
    """`raw` is an http(s) or data: URL rather than a path (one rule for the dispatcher and
    the tool, so a value is never judged as a URL by one and a path by the other)."""
    return raw.strip().lower().startswith(URL_PREFIXES)


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


def _within(path: Path, base: Path) -> bool:
    # As strings: `base in path.parents` builds and compares a Path per ancestor, and one
    # command's words are judged by the thousand (talaria.agent.withheld).
    text, prefix = str(path), str(base)
    return text == prefix or text.startswith(prefix.rstrip("/") + "/")


def _holds_token(path: Path) -> bool:
    """Whether a package-manager config holds a credential; unreadable counts as yes."""
    try:
        with open(path, "rb") as f:
            data = f.read(TOKEN_SNIFF_BYTES).lower()
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    return any(marker in data for marker in TOKEN_MARKERS)


def _env_file(name: str) -> bool:
    return name.startswith(".env") and not name.endswith(ENV_TEMPLATE_SUFFIXES)


def _glob_match(path: Path, pattern: str) -> bool:
    """`pattern` (absolute, or relative: matched against the trailing components) matches
    `path` or one of its ancestors. `*` crosses `/`, so `secrets/*` covers a whole tree."""
    chain = [path, *path.parents]
    if pattern.startswith("/"):
        return any(fnmatchcase(str(p), pattern) for p in chain)
    for p in chain:
        parts = p.parts[1:]
        if any(fnmatchcase("/".join(parts[i:]), pattern) for i in range(len(parts))):
            return True
    return False


@dataclass(frozen=True, slots=True)
class Sensitive:
    """Which paths are secrets (reading asks) or guarded (writing asks), for one user."""

    home: Path = field(default_factory=Path.home)
    talaria_home: Path | None = None
    """Default: $TALARIA_HOME or ~/.talaria."""
    extra: tuple[str, ...] = ()
    """More globs (`sensitive_paths`): `~/...` and `/...` are absolute, others match the
    trailing components of a path anywhere (`*.tfstate`, `config/secrets/*`)."""

    def _talaria(self) -> Path:
        if self.talaria_home is not None:
            return self.talaria_home
        from talaria.tools.home import talaria_home

        return talaria_home(user_home=self.home)

    def _patterns(self) -> list[str]:
        out = []
        for raw in self.extra:
            pattern = raw.strip().rstrip("/")
            if pattern == "~" or pattern.startswith("~/"):
                pattern = str(self.home) + pattern[1:]
            if pattern:
                out.append(os.path.normpath(pattern) if pattern.startswith("/") else pattern)
        return out

    def _secret(self, path: Path, home: Path, talaria: Path) -> bool:
        name = path.name
        if name in SECRET_NAMES or name.endswith(SECRET_SUFFIXES) or _env_file(name):
            return True
        if name in TOKEN_FILES and _holds_token(path):
            return True
        if SECRET_DIRS.intersection(path.parts):
            return True
        if name == "config" and path.parent.name == ".git":
            return True
        if path == talaria / "credentials" or path.parent == talaria and path.name.startswith(STORE_NAME):
            return True
        if any(_within(path, home / d) for d in HOME_SECRETS):
            return True
        return any(_glob_match(path, p) for p in self._patterns())

    def _homes(self) -> tuple[tuple[Path, Path], tuple[Path, Path]]:
        return (self.home, self._talaria()), (_real(self.home), _real(self._talaria()))

    def _check(self, path: Path, *, internals: bool, homes: Any = None) -> bool:
        try:
            lexical = Path(os.path.normpath(path))
            real = _real(lexical)
            homes = homes or self._homes()
            for p, (home, talaria) in ((lexical, homes[0]), (real, homes[1])):
                if self._secret(p, home, talaria):
                    return True
                if internals and (".git" in p.parts[:-1] or p.name == ".git"):
                    return True
        except (OSError, ValueError):  # e.g. a NUL byte: no such file, nothing to protect
            return False
        return False

    def secret(self, path: Path) -> bool:
        """Reading `path` shows a secret (checked as written and at its symlink target)."""
        return self._check(path, internals=False)

    def first_secret(self, paths: Iterable[Path]) -> Path | None:
        """The first of `paths` that `secret` holds for (the homes resolved once: many paths
        judged at once, e.g. every word of a command)."""
        homes = self._homes()
        return next((p for p in paths if self._check(p, internals=False, homes=homes)), None)

    def guarded(self, path: Path) -> bool:
        """Writing `path` asks: a secret, or repository internals (`.git/`)."""
        return self._check(path, internals=True)

    def hidden_paths(self) -> tuple[Path, ...]:
        """Absolute secrets that exist, for a sandbox to hide: the home stores,
        $TALARIA_HOME and the absolute `extra` globs (each bounded)."""
        found = [self.home / d for d in HOME_SECRETS]
        found.append(self._talaria())
        for pattern in self._patterns():
            if pattern.startswith("/"):
                matches = glob.iglob(pattern, recursive=True, include_hidden=True)
                found += map(Path, itertools.islice(matches, MAX_HIDDEN_GLOB_MATCHES))
        return tuple(p for p in dict.fromkeys(found) if os.path.lexists(p))


def is_sensitive(path: Path, home: Path) -> bool:
    """Writing `path` asks under the default policy (secrets and `.git/` internals)."""
    return Sensitive(home).guarded(path)


def display(path: Path, cwd: Path) -> str:
    """How a path is shown to the model: relative to `cwd` when below it, else absolute."""
    try:
        rel = path.relative_to(cwd)
    except ValueError:
        return str(path)
    return str(rel) if rel.parts else "."
