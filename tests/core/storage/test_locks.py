"""``exclusive``: one holder at a time across processes; a wait is told; a dead holder's lock
is released by the kernel."""

import multiprocessing as mp
import time

from retailsim_core.storage.locks import exclusive


def _hold(path, seconds, ready):
    with exclusive(path):
        ready.set()
        time.sleep(seconds)


def test_a_second_holder_waits_for_the_first_and_is_told(tmp_path):
    path = tmp_path / "locks" / "step.lock"
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold, args=(path, 1.5, ready))
    holder.start()
    assert ready.wait(60)
    told = []
    with exclusive(path, on_wait=told.append) as waited:
        pass  # entered only once the holder let go, about 1.5 s after it took the lock
    holder.join(30)
    assert waited >= 0.5 and len(told) == 1 and str(path) in told[0]


def test_a_killed_holder_leaves_no_lock_behind(tmp_path):
    path = tmp_path / "step.lock"
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold, args=(path, 600, ready))
    holder.start()
    assert ready.wait(60)
    holder.kill()
    holder.join(30)
    with exclusive(path) as waited:
        assert waited < 5
