"""`stop_group`'s sequence: SIGTERM, SIGTERM again, SIGKILL once the grace is over; it stops
as soon as the group ended or cannot be signalled. Its callers' real kills (a cancelled command
on local, docker and ssh) are in tests/tools/environments/test_env_tools.py."""

from __future__ import annotations

import signal

import pytest

from talaria.tools.stopping import TERM_AGAIN_S, stop_group

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Group:
    """A process group as `stop_group` sees it: ends after `ends_after` signals."""

    def __init__(self, ends_after: int | None = None, refuses_after: int | None = None) -> None:
        self.ends_after, self.refuses_after = ends_after, refuses_after
        self.sent: list[int] = []
        self.waits: list[float] = []

    async def send(self, sig: int) -> bool:
        if self.refuses_after is not None and len(self.sent) >= self.refuses_after:
            return False
        self.sent.append(sig)
        return True

    async def ended(self, seconds: float) -> bool:
        self.waits.append(seconds)
        return self.ends_after is not None and len(self.sent) >= self.ends_after


async def test_a_group_that_ignores_sigterm_gets_it_twice_then_sigkill_after_the_grace() -> None:
    group = Group()
    assert not await stop_group(group.send, group.ended, grace=2.0, kill_wait=10.0)
    assert group.sent == [signal.SIGTERM, signal.SIGTERM, signal.SIGKILL]
    assert group.waits == [TERM_AGAIN_S, 2.0 - TERM_AGAIN_S, 10.0]


async def test_a_group_that_ends_on_the_second_sigterm_is_not_killed() -> None:
    group = Group(ends_after=2)
    assert await stop_group(group.send, group.ended, grace=2.0, kill_wait=10.0)
    assert group.sent == [signal.SIGTERM, signal.SIGTERM]


async def test_a_group_that_ends_at_once_gets_one_sigterm() -> None:
    group = Group(ends_after=1)
    assert await stop_group(group.send, group.ended, grace=2.0, kill_wait=10.0)
    assert group.sent == [signal.SIGTERM]


async def test_a_group_that_cannot_be_signalled_any_more_is_left() -> None:
    group = Group(refuses_after=1)
    assert not await stop_group(group.send, group.ended, grace=2.0, kill_wait=10.0)
    assert group.sent == [signal.SIGTERM] and group.waits == [TERM_AGAIN_S]


async def test_a_grace_shorter_than_the_second_sigterm_still_kills_in_time() -> None:
    group = Group()
    await stop_group(group.send, group.ended, grace=0.01, kill_wait=1.0)
    assert group.sent == [signal.SIGTERM, signal.SIGTERM, signal.SIGKILL]
    assert sum(group.waits[:2]) == pytest.approx(0.01)
