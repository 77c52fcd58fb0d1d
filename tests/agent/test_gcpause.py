"""The collector paused around large imports: pauses nest across threads, the last one
freezes what is alive and collects again, and a collector that was off stays off."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from talaria.agent import gcpause


@pytest.fixture(autouse=True)
def collector() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    gc.unfreeze()
    gc.enable() if was else gc.disable()


def test_a_pause_stops_collecting_and_its_end_freezes_what_is_alive() -> None:
    gc.unfreeze()
    with gcpause.paused():
        assert not gc.isenabled()
        kept = [[] for _ in range(1000)]  # tracked containers made during the import
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(kept)


def test_pauses_nest_and_the_last_one_resumes() -> None:
    gcpause.pause()
    gcpause.pause()
    gcpause.resume()
    assert not gc.isenabled()
    gcpause.resume()
    assert gc.isenabled()
    gcpause.resume()  # one too many: nothing to end
    assert gc.isenabled()


def test_a_pause_in_another_thread_holds_until_it_ends() -> None:
    started, release = threading.Event(), threading.Event()

    def importer() -> None:
        with gcpause.paused():
            started.set()
            release.wait(10)

    thread = threading.Thread(target=importer)
    thread.start()
    assert started.wait(10)
    with gcpause.paused():
        pass
    assert not gc.isenabled()  # the other thread's import still runs
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_without_freeze_nothing_is_frozen() -> None:
    gc.unfreeze()
    with gcpause.paused(freeze=False):
        pass
    assert gc.get_freeze_count() == 0 and gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with gcpause.paused():
        pass
    assert not gc.isenabled()
