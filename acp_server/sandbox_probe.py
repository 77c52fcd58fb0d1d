"""The sandbox tier for `initialize`'s `_meta`, detected off the start-up path.

Detection runs bwrap (~40 ms with its imports, 0.1 s on a busy machine), which `initialize`
should not wait for: what the last detection found is kept in `$TALARIA_HOME/run/sandbox.json`
with the facts it depends on (bwrap's file, the kernel, the user-namespace switches, the
user). While those are unchanged `initialize` answers with it at once; detection still runs
at every start and rewrites the file when its finding differs. A first start, or one after
any of those facts changed, waits for detection as before.
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


class SandboxProbe:
    """execute_code's sandbox tier, detected in a thread from start-up (see the module)."""

    def __init__(self, path: Path | None = None) -> None:
        self._tier = "unknown"
        self._path = path or cache_path()
        self._facts = facts()
        self._known = self._remembered()
        self._done = threading.Event()
        threading.Thread(target=self._detect, name="sandbox-probe", daemon=True).start()

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
