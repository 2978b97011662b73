"""temper/firsttime.py's owner lock through `python -m temper.firsttime` (what the set-up scripts run): a
waiter on a live holder gives up after TEMPER_LOCK_TIMEOUT_S in one line naming the artefact and the
holder; once the holder is killed (SIGKILL), the next run takes the lock over and says so in one line."""

import sys
import time

import pytest
from interrupt_helpers import env, kill_when, run, start

from temper import firsttime


@pytest.mark.timeout(120)
def test_a_waiter_gives_up_on_a_live_holder_and_the_next_run_takes_a_dead_ones_lock_over(tmp_path):
    lock = tmp_path / "artefact.lock"
    hold = [sys.executable, "-m", "temper.firsttime", str(lock), "my artefact", "--"]
    holder = start([*hold, "sleep", "600"], env())
    deadline = time.monotonic() + 60
    while not (firsttime.is_held(lock) and firsttime.read_owner(lock)):
        assert time.monotonic() < deadline and holder.poll() is None
        time.sleep(0.05)

    waiter = run([*hold, "true"], env(TEMPER_LOCK_TIMEOUT_S="1"), timeout=60)
    lines = waiter.stdout.strip().splitlines()
    assert waiter.returncode == 1 and "Traceback" not in waiter.stdout, waiter.stdout
    assert f"waiting for my artefact: {lock} is held by pid {holder.pid} on" in lines[0], lines
    assert lines[-1].startswith(f"error: my artefact: gave up after 1 s waiting for {lock}, held by pid "
                                f"{holder.pid} on"), lines

    kill_when(holder, lambda: True, timeout=10)  # the holder and its command, by the holder's PID
    done = run([*hold, "true"], env(), timeout=60)
    assert done.returncode == 0, done.stdout
    assert f"my artefact: taking over {lock} from pid {holder.pid} on" in done.stdout, done.stdout
    assert "which is gone" in done.stdout and not firsttime.is_held(lock) and not firsttime.read_owner(lock)
