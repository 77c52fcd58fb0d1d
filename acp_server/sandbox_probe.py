"""The sandbox tier for `initialize`'s `_meta`, detected off the start-up path.

Detection runs bwrap (~40 ms with its imports, 0.1 s on a busy machine), which `initialize`
should not wait for: what the last detection found is kept in `$TALARIA_HOME/run/sandbox.json`
with the facts it depends on (bwrap's file, the kernel, the user-namespace switches, the
user). While those are unchanged `initialize` answers with it at once; detection still runs
at every start (`talaria acp`: RECHECK_AFTER_S later, off the start's path) and rewrites the
file when its finding differs. A first start, or one after any of those facts changed, waits
for detection as before.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from pathlib import Path

import anyio

log = logging.getLogger(__name__)

SWITCHES = ("/proc/sys/kernel/unprivileged_userns_clone", "/proc/sys/user/max_user_namespaces",
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
"""Kernel settings that decide whether bwrap can make its namespaces."""


def cache_path() -> Path:
    home = Path(os.environ.get("TALARIA_HOME") or Path.home() / ".talaria").expanduser()
    return home / "run" / "sandbox.json"


def facts() -> list[str]:
    """What the tier depends on, as strings; any change means detecting again."""
    out = [os.uname().release, str(os.getuid())]
    bwrap = shutil.which("bwrap")
    try:
        stat = os.stat(bwrap) if bwrap else None
    except OSError:
        stat = None
    out.append(f"{bwrap}:{stat.st_size}:{stat.st_mtime_ns}" if stat else "no bwrap")
    for switch in SWITCHES:
        try:
            with open(switch) as f:
                out.append(f.read().strip())
        except OSError:
            out.append("-")
    return out


RECHECK_AFTER_S = 2.0
"""`talaria acp`: with a kept tier, how long after start the detection runs again. Not at
once: its imports and bwrap's start (20-40 ms of the interpreter's time) would share it with
`initialize` and `session/new`, which an editor waits for."""


class SandboxProbe:
    """execute_code's sandbox tier, detected in a thread from start-up (see the module);
    `recheck_after`: with a kept tier, detect again that many seconds later."""

    def __init__(self, path: Path | None = None, recheck_after: float = 0.0) -> None:
        self._tier = "unknown"
        self._path = path or cache_path()
        self._facts = facts()
        self._known = self._remembered()
        self._done = threading.Event()
        thread: threading.Thread = threading.Thread(
            target=self._detect, name="sandbox-probe", daemon=True)
        if self._known is not None and recheck_after > 0:
            thread = threading.Timer(recheck_after, self._detect)
            thread.name, thread.daemon = "sandbox-probe", True
        thread.start()

    def _remembered(self) -> str | None:
        try:
            kept = json.loads(self._path.read_text())
        except (OSError, ValueError):
            return None
        if isinstance(kept, dict) and kept.get("facts") == self._facts:
            tier = kept.get("tier")
            return tier if isinstance(tier, str) else None
        return None

    def _detect(self) -> None:
        try:
            from talaria.tools.sandbox.tiers import detect_tier

            self._tier = detect_tier()
            if self._tier != self._known:
                self._remember()
        except Exception:  # reported as "unknown"; execute_code reports its own failure
            log.exception("sandbox detection failed")
        finally:
            self._done.set()

    def _remember(self) -> None:
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            part = self._path.with_name(f"{self._path.name}.{os.getpid()}.part")
            part.write_text(json.dumps({"tier": self._tier, "facts": self._facts}))
            part.replace(self._path)
        except OSError as exc:  # a read-only home: every start detects, as before
            log.info("could not keep the sandbox tier in %s: %s", self._path, exc)

    async def tier(self) -> str:
        if self._done.is_set():
            return self._tier
        if self._known is not None:
            return self._known
        await anyio.to_thread.run_sync(self._done.wait, 5.0)
        return self._tier
