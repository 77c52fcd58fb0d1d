"""A session's kernel started ahead of its first script: it is the one the first call uses,
and prestarting never costs another session its kernel."""

from __future__ import annotations

import os
from pathlib import Path

from talaria.tools.execute_code.env import ExecSettings
from talaria.tools.execute_code.kernel import Kernel, fingerprint
from talaria.tools.execute_code.pool import KernelPool
from talaria.tools.execute_code.tool import prestart
from tests.exec_helpers import execute, kernel_tag, tagged, wait_for, wait_gone
from tests.helpers import make_session


def test_the_first_call_uses_the_prestarted_kernel(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    assert prestart(session.tool_state, session.cwd, session.id)
    tag = kernel_tag(session)
    assert wait_for(lambda: tagged(tag)), "it runs before any script"
    assert not prestart(session.tool_state, session.cwd, session.id), "one is enough"
    first = execute(session, "x = 41\nprint(x + 1)")
    assert first["output"] == "42\n" and first["kernel"] == "new"
    assert kernel_tag(session) == tag
    second = execute(session, "print(x)")
    assert second["output"] == "41\n" and "kernel" not in second
    session.close()
    assert wait_gone(tag)


def test_a_prestarted_kernel_that_died_is_replaced_without_a_word(fake_llm,
                                                                  tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    assert prestart(session.tool_state, session.cwd, session.id)
    slot = session.tool_state.kernel
    slot.pool.kernels[slot.key].kill()
    result = execute(session, "print(1)")
    assert result["output"] == "1\n" and result["kernel"] == "new"  # no "previous one ended"
    session.close()


def test_settings_changed_after_a_prestart_get_a_kernel_with_the_new_ones(
        fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    assert prestart(session.tool_state, session.cwd, session.id)
    old = kernel_tag(session)
    session.tool_state.exec_settings = ExecSettings(
        mode="strict", cache_dir=session.tool_state.exec_settings.cache_dir)
    result = execute(session, "import os\nprint(os.getcwd() == os.environ['TMPDIR'])")
    assert result["output"] == "True\n" and kernel_tag(session) != old
    assert wait_gone(old)
    session.close()


def test_prestart_never_stops_a_kernel_that_ran_code(tmp_path: Path) -> None:
    settings = ExecSettings(cache_dir=tmp_path / "cache")
    pool = KernelPool(max_live=2, idle_s=60)
    fp = fingerprint(settings, tmp_path, dict(os.environ))

    def spawn() -> Kernel:
        return Kernel.spawn(settings, tmp_path, "")

    used = spawn()
    used.cells = 1  # as if a script had run
    pool.kernels["used"] = used
    try:
        assert pool.session("a").prestart(fp, spawn)
        a = pool.kernels["a"]
        assert pool.prestart("b", fp, spawn), "room made by stopping the unused kernel only"
        assert "a" not in pool.kernels and wait_gone(a.tag)
        pool.kernels["b"].cells = 1
        assert not pool.prestart("c", fp, spawn), "a full pool of used kernels: nothing"
        assert set(pool.kernels) == {"used", "b"} and used.alive()
    finally:
        pool.close()
