"""How a command's process group is stopped: SIGTERM, SIGTERM again a moment later, SIGKILL.

Used where a command's group gets a grace before SIGKILL: a local command
(`talaria.tools.local.workspace`), a background process (`Background.kill`), a command in a
container or on an SSH host through the environment helper (`environments.remote`). Each
passes its own way to signal the group and to see it end. (An editor's terminal is the
editor's to kill; a container without python3 gets SIGKILL at once.)

Why the second SIGTERM: bash blocks SIGTERM (with SIGINT and SIGCHLD) while it forks
(`make_child`). A group's SIGTERM that lands in that moment stays pending in the shell, which
dies of it when it unblocks, and can miss the child being forked. Seen here with
`sleep 60 & sleep 60` cancelled just after it started: in about one run in four a `sleep 60`
ran on with nothing pending and SIGTERM at its default, and the cancel waited out the whole
grace before SIGKILL (terminal cancel p95 2.0 s, issue 29). The group's SIGTERM sent again
after TERM_AGAIN_S reaches that child as the command it became. A process still handling the
first SIGTERM when the second comes gets both: to a shell's `trap` or a server's graceful
stop that is the same request twice.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable

TERM_AGAIN_S = 0.05
"""After a group's SIGTERM, when it is sent again to what has not exited (see above)."""


async def stop_group(
    send: Callable[[int], Awaitable[bool]], ended: Callable[[float], Awaitable[bool]],
    grace: float, kill_wait: float,
) -> bool:
    """SIGTERM, SIGTERM again after TERM_AGAIN_S, SIGKILL once `grace` has passed since the
    first. `send(sig)` signals the group (False: it cannot be signalled any more: gone, or
    the connection to it lost); `ended(seconds)` waits up to that long for the group's end
    and says whether it came. True once the group ended."""
    again = min(TERM_AGAIN_S, grace)
    for sig, wait in ((signal.SIGTERM, again), (signal.SIGTERM, grace - again),
                      (signal.SIGKILL, kill_wait)):
        if not await send(sig):
            return False
        if await ended(wait):
            return True
    return False
