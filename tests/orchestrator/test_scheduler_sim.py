"""benchmarks/scheduler_sim.py at a small size: the real scheduler, pipeline and store over a simulated fleet
keep the configured mix, send infrastructure failures through the real retry and quarantine path, and serve
higher-priority domains first when slots are scarce. No timing is asserted (speed is the benchmark's)."""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "benchmarks" / "scheduler_sim.py"


@pytest.mark.slow  # two Python processes that import temper (~20 s on a loaded 2-core box)
@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_small_fleet_keeps_the_mix_and_retries_and_quarantines_through_the_real_path(tmp_path: Path) -> None:
    out = tmp_path / "scheduler_sim.json"
    proc = subprocess.run(
        [sys.executable, str(SIM), "--episodes", "320", "--domains", "20", "--tasks-per-domain", "4",
         "--infra-rate", "0.05", "--broken-rate", "0.05", "--time-scale", "0.002", "--no-memory-pass",
         "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=220, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = json.loads(proc.stdout.strip().splitlines()[-1])  # the last stdout line is the headline JSON
    assert {"us_per_decision", "us_per_decision_cpu", "mix_max_abs_dev_points", "retries", "quarantined",
            "peak_rss_mb", "growth_exponents", "targets", "pass"} <= last.keys()
    assert set(last["targets"]) == {"overhead_under_100us", "mix_within_2_points", "growth_no_worse_than_linear",
                                    "retry_and_quarantine_path"}
    (run,) = json.loads(out.read_text())["runs"]
    assert run["decisions"] == 120 and run["episodes_started"] == 960  # 3 waves of 320 episodes, groups of 8
    assert run["store_agrees_with_decisions"]  # every decision is a group in the store, under its domain
    # failures went through faults.with_retries and were recorded: every failed try the backend produced is a
    # retry or a failed episode in the store, reported sandbox crashes and raised worker errors alike
    assert run["retries"] > 0 and run["retry_path_ok"]
    assert run["failures_by_kind"].get("sandbox_crash", 0) > 0 and run["failures_by_kind"].get("worker_error", 0) > 0
    # broken tasks (every try fails) that were scheduled are quarantined, in the scheduler and in the store
    assert run["broken_tasks_scheduled"] >= 1 and run["quarantined_broken"] == run["broken_tasks_scheduled"]
    assert run["quarantine_ok"] and run["failed_episodes"] >= 8 * run["broken_tasks_scheduled"]
    assert run["mix_max_abs_dev_points"] <= 2.0 and last["targets"]["mix_within_2_points"]
    assert run["priority_first_fraction"] == 1.0 and run["priority_pairs"] > 0
    assert run["trainer_steps"] >= 1 and run["peak_episodes_running"] > 8  # more than one group at a time


@pytest.mark.timeout(120)
def test_higher_priority_domains_are_served_first_when_slots_are_scarce() -> None:
    sys.path.insert(0, str(SIM.parent))
    try:
        import scheduler_sim as sim
    finally:
        sys.path.remove(str(SIM.parent))
    # ten domains of equal weight, priority 1 on the odd ones; room for two groups of 8 at a time
    domains = [sim.Domain(f"d{i}", 1.0, i % 2, 30.0, 0.3, 0.0, 0.5) for i in range(10)]
    cfg = sim.SimConfig(episodes=16, domains=10, waves=5, tasks_per_domain=2, infra_rate=0.0, broken_rate=0.0,
                        time_scale=0.001)
    r = asyncio.run(sim.simulate(cfg, domains))
    assert r["peak_episodes_running"] <= 16  # slots were scarce: never more than two groups ran
    assert r["first_decisions"] == [1, 3, 5, 7, 9, 0, 2, 4, 6, 8]  # every high-priority domain before any other
    assert r["priority_first_fraction"] == 1.0 and r["mix_max_abs_dev_points"] == 0.0
