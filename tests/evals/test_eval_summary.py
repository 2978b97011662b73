"""summary.json metrics on hand-built records: pass@k by hand, infra failures apart, domains, CIs."""

import math

from temper.evals.records import ItemRecord, ItemStore
from temper.evals.summary import ks_for, summarize_suite


def rec(task: str, sample: int, reward: float, domain: str = "math", failure: str | None = None) -> ItemRecord:
    return ItemRecord(suite="s", task_id=task, sample=sample, domain=domain, reward=reward, failure=failure)


def test_pass_at_k_matches_hand_computed_values_and_failures_stay_apart() -> None:
    # Task a: 2 of 5 samples correct; task b: 0 of 5 correct, plus one infrastructure failure.
    records = [rec("a", i, float(i < 2)) for i in range(5)] + [rec("b", i, 0.0, "code") for i in range(5)]
    records.append(rec("b", 5, 0.0, "code", failure="sandbox_crash"))
    s = summarize_suite(records, samples=5)
    assert ks_for(5) == [1, 2, 5] and ks_for(10) == [1, 2, 5, 10] and ks_for(3) == [1, 2, 3]
    # pass@1 = c/n; pass@2 = 1 - C(n-c, 2)/C(n, 2) = 1 - 3/10 for task a; pass@5 = 1 for a.
    assert math.isclose(s["pass@1"], (0.4 + 0.0) / 2)
    assert math.isclose(s["pass@2"], (0.7 + 0.0) / 2)
    assert math.isclose(s["pass@5"], (1.0 + 0.0) / 2)
    assert s["n"] == 2 and s["items"] == 11 and s["infra_failures"] == 1
    assert s["failures"] == {"sandbox_crash": 1}
    assert math.isclose(s["mean_reward"], 0.2) and s["ci_low"] <= 0.2 <= s["ci_high"]
    assert s["domains"]["math"]["pass@2"] == 0.7 and s["domains"]["code"]["pass@1"] == 0.0
    assert s["domains"]["code"]["infra_failures"] == 1


def test_partial_rewards_and_threshold() -> None:
    records = [rec("a", 0, 0.5), rec("b", 0, 1.0)]
    s = summarize_suite(records, samples=1)
    assert s["mean_reward"] == 0.75 and s["pass@1"] == 0.5
    assert summarize_suite(records, samples=1, threshold=0.5)["pass@1"] == 1.0


def test_a_task_with_only_failures_is_not_scored() -> None:
    s = summarize_suite([rec("a", 0, 0.0, failure="engine_error")], samples=1)
    assert s["n"] == 0 and s["mean_reward"] is None and s["pass@1"] is None and s["infra_failures"] == 1


def test_store_skips_a_torn_line_and_later_records_win(tmp_path) -> None:
    store = ItemStore(tmp_path)
    store.append([rec("a", 0, 0.0, failure="worker_error"), rec("b", 0, 1.0)])
    with store.path.open("a") as f:
        f.write('{"suite": "s", "task_id": "c", "sam')  # a kill mid-write
    store.append([rec("a", 0, 1.0)])
    done = store.load()
    assert set(done) == {("a", 0), ("b", 0)} and done[("a", 0)].reward == 1.0 and done[("a", 0)].ok


def test_each_task_category_gets_its_tool_calls_and_the_share_that_used_the_expected_tool() -> None:
    def item(task: str, category: str, calls: int, used: bool | None) -> ItemRecord:
        info = {"category": category, "tool_calls": calls, "tool_errors": 0}
        if used is not None:
            info |= {"tools_expected": ["sassc"], "expected_tool_used": used}
        return ItemRecord("web", task, 0, "web", reward=1.0, info=info)

    out = summarize_suite([item("a", "assets", 4, True), item("b", "assets", 2, False), item("c", "assets", 3, True),
                           item("d", "layout", 5, None)], samples=1)
    assert out["categories"]["assets"] == {"items": 3, "tool_calls_mean": 3.0, "tools_expected_items": 3,
                                           "expected_tool_used_rate": round(2 / 3, 6)}  # rounded, as every rate
    assert out["categories"]["layout"]["expected_tool_used_rate"] is None  # no tool expected: no rate
    assert "categories" not in summarize_suite([ItemRecord("toy", "t", 0, "toy", reward=1.0)], samples=1)
