"""A shadow git repository per project: snapshots of its files, the user's own `.git` untouched.

    repo = ShadowRepo(home, project)      # $TALARIA_HOME/checkpoints/<project hash>/
    sha, left_out = repo.snapshot("before turn 3")  # every file git would add, one commit
    repo.diff(a, b)                       # [(status A|M|D, path)] from a to b
    repo.contents(sha, paths)             # {path: (bytes, mode) | None}

The repository lives in `git/` under the project's folder, with the project as its work tree
(`GIT_DIR` + `GIT_WORK_TREE`; nothing is written into the project). git honours the project's
`.gitignore`; `SKIP_DIRS` (dependency and cache folders), files larger than `FILE_LIMIT` and
folders that are git repositories of their own (git would keep only their commit) are left
out too, and a project with more than `MAX_FILES` files is not checkpointed at all (each is
reported, never silently skipped). Snapshots chain as commits on one branch, so git never
drops one. Calls are blocking (run them in a worker thread) and hold the folder's lock, so
sessions and `talaria checkpoints` on the same project take turns.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from talaria.tools.errors import TalariaError

MiB = 1024 * 1024
FILE_LIMIT = 5 * MiB
"""Files larger than this are not checkpointed (named in the checkpoint's `skipped`)."""
MAX_FILES = 20_000
"""A project with more files than this is not checkpointed (walking it would slow every turn)."""
SKIP_DIRS = frozenset({
    ".git", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", ".tox", ".nox", ".next", ".gradle", ".terraform",
})
"""Folders never checkpointed: dependencies and caches that tools recreate."""
GIT_TIMEOUT_S = 60.0
MAX_PACKS = 40
"""Packs the shadow repository may hold before they are merged into one (`git repack`)."""
GIT_CONFIG = """
[core]
\tautocrlf = false
\tquotepath = false
\tuntrackedCache = true
\thooksPath = {hooks}
[gc]
\tauto = 0
[user]
\tname = Talaria checkpoints
\temail = checkpoints@talaria.invalid
[commit]
\tgpgsign = false
"""


class CheckpointError(TalariaError):
    """A checkpoint could not be taken or read; the message says why and what to do."""


def project_hash(project: Path) -> str:
    return hashlib.sha256(str(project.resolve()).encode()).hexdigest()[:16]


def checkpoints_dir(home: Path, project: Path) -> Path:
    return home / "checkpoints" / project_hash(project)


class ShadowRepo:
    def __init__(self, home: Path, project: Path) -> None:
        self.project = project.resolve()
        self.dir = checkpoints_dir(home, self.project)
        self.git_dir = self.dir / "git"
        self.home = home.resolve()

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the project's checkpoint lock (between processes too)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / "lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def git(self, *args: str, stdin: bytes | None = None, check: bool = True) -> bytes:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(GIT_DIR=str(self.git_dir), GIT_WORK_TREE=str(self.project),
                   GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0",
                   GIT_OPTIONAL_LOCKS="0", LC_ALL="C",
                   # Every blob straight into one pack per command instead of a loose object
                   # per file: the first snapshot of a 1,000-file project takes ~0.15 s, not ~1 s.
                   GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="core.bigFileThreshold",
                   GIT_CONFIG_VALUE_0="1")
        try:
            done = subprocess.run(["git", *args], input=stdin, capture_output=True, env=env,
                                  cwd=self.project, timeout=GIT_TIMEOUT_S, check=False)
        except FileNotFoundError:
            raise CheckpointError("checkpoints need git, which is not installed: install it, "
                                  "or turn checkpoints off (TALARIA_CHECKPOINTS=false)") from None
        except subprocess.TimeoutExpired:
            raise CheckpointError(f"git {args[0]} took over {GIT_TIMEOUT_S:g} s") from None
        if check and done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip().splitlines()
            raise CheckpointError(f"git {args[0]} failed: {why[-1] if why else done.returncode}")
        return done.stdout

    def _init(self) -> None:
        if (self.git_dir / "HEAD").exists():
            return
        self.git("init", "-q")
        hooks = self.git_dir / "no-hooks"
        hooks.mkdir(exist_ok=True)
        with open(self.git_dir / "config", "a", encoding="utf-8") as config:
            config.write(GIT_CONFIG.format(hooks=hooks))
        (self.dir / "project").write_text(str(self.project), encoding="utf-8")

    def scan(self) -> tuple[list[str], list[str]]:
        """(files over `FILE_LIMIT`, folders that are git repositories of their own), as
        relative paths; raises CheckpointError past `MAX_FILES`."""
        large: list[str] = []
        nested: list[str] = []
        count = 0
        skip = {self.home} if self.home.is_relative_to(self.project) else set()
        for top, dirs, files in os.walk(self.project):
            if top != str(self.project) and (".git" in dirs or ".git" in files):
                # git would record only the repository's commit (a gitlink), never its
                # files: a restore could not bring them back, so say so instead.
                nested.append(os.path.relpath(top, self.project))
                dirs[:] = []
                continue
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and Path(top, d) not in skip]
            count += len(files)
            if count > MAX_FILES:
                raise CheckpointError(f"the project has more than {MAX_FILES:,} files, too many "
                                      "to checkpoint before every turn; changes here cannot be undone or restored")
            for name in files:
                path = os.path.join(top, name)
                try:
                    if os.lstat(path).st_size > FILE_LIMIT:
                        large.append(os.path.relpath(path, self.project))
                except OSError:
                    continue
        return sorted(large), sorted(nested)

    def _exclude(self, left_out: list[str]) -> None:
        patterns = [f"{d}/" for d in sorted(SKIP_DIRS)]
        if self.home.is_relative_to(self.project) and self.home != self.project:
            patterns.append("/" + _escape(str(self.home.relative_to(self.project))) + "/")
        patterns += ["/" + _escape(path) for path in left_out]
        text = "\n".join(patterns) + "\n"
        exclude = self.git_dir / "info" / "exclude"
        exclude.parent.mkdir(parents=True, exist_ok=True)
        if not exclude.exists() or exclude.read_text(encoding="utf-8") != text:
            exclude.write_text(text, encoding="utf-8")

    def stage(self) -> list[str]:
        """Bring the index up to the project's files; returns what was left out, each with
        why (for the user). Call with the lock held."""
        self._init()
        large, nested = self.scan()
        self._exclude(large + nested)
        self.git("add", "-A", "--ignore-errors", "--", ".", check=False)  # unreadable: skipped
        return ([f"{path} (larger than {FILE_LIMIT // MiB} MiB)" for path in large]
                + [f"{path}/ (a git repository of its own)" for path in nested])

    def snapshot(self, label: str, paths: list[str] | None = None) -> tuple[str, list[str]]:
        """Commit the project's files as they are now: (commit sha, what was left out and
        why). With `paths`, only those are brought up to date (a restore knows what it
        wrote: no walk of the project). Call with the lock held."""
        if paths is None:
            left_out = self.stage()
        else:
            self._init()
            left_out = []
            # update-index, not add: a path that is gone is removed, never "did not match".
            self.git("update-index", "--add", "--remove", "--replace", "-z", "--stdin",
                     stdin=b"".join(os.fsencode(p) + b"\0" for p in paths))
        self.git("commit", "-q", "--no-verify", "--allow-empty", "-m", label or "checkpoint")
        self._tidy()
        return self.head(), left_out

    def _tidy(self) -> None:
        """Each snapshot adds a small pack; past `MAX_PACKS` they become one, so finding an
        object does not slow down with the number of checkpoints."""
        packs = self.git_dir / "objects" / "pack"
        if sum(1 for _ in packs.glob("*.pack")) > MAX_PACKS:
            self.git("repack", "-a", "-d", "-q")

    def head(self) -> str:
        ref = (self.git_dir / "HEAD").read_text(encoding="utf-8").strip()
        if ref.startswith("ref: "):
            path = self.git_dir / ref[5:]
            if path.exists():
                return path.read_text(encoding="utf-8").strip()
        return self.git("rev-parse", "HEAD").decode().strip()

    def diff(self, old: str, new: str) -> list[tuple[str, str]]:
        """(status, path) of files that differ: A added since `old`, M modified, D deleted."""
        # Gitlinks (nested repositories an older snapshot recorded) have no files to restore.
        out = self.git("diff", "--name-status", "-z", "--no-renames", "--ignore-submodules=all",
                       old, new)
        fields = out.decode("utf-8", errors="surrogateescape").split("\0")
        return [(fields[i][0], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]

    def contents(self, sha: str, paths: list[str]) -> dict[str, tuple[bytes, int] | None]:
        """Each path's bytes and mode in commit `sha` (None: not in it)."""
        if not paths:
            return {}
        modes: dict[str, int] = {}
        listing = self.git("ls-tree", "-z", "-r", sha, "--", *paths)
        for entry in listing.split(b"\0"):
            if entry:
                meta, _, name = entry.partition(b"\t")
                mode, kind, _sha = meta.split()
                if kind == b"blob":  # a gitlink has no content here
                    modes[name.decode("utf-8", errors="surrogateescape")] = int(mode, 8)
        present = [p for p in paths if p in modes]
        data = self.git("cat-file", "--batch", stdin="".join(f"{sha}:{p}\n" for p in present).encode(
            "utf-8", errors="surrogateescape"))
        out: dict[str, tuple[bytes, int] | None] = dict.fromkeys(paths)
        pos = 0
        for path in present:
            header_end = data.index(b"\n", pos)
            size = int(data[pos:header_end].split()[2])
            out[path] = (data[header_end + 1 : header_end + 1 + size], modes[path])
            pos = header_end + 1 + size + 1
        return out


def _escape(path: str) -> str:
    """A path as a literal gitignore pattern."""
    return "".join("\\" + c if c in "*?[]!#\\ " else c for c in path)
