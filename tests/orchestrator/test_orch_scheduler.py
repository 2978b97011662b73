"""The scheduler: weighted mix, per-suite concurrency, curriculum pools, quarantine."""

from collections import Counter

from temper.envs.suites.arithmetic import ArithmeticSuite, ToySuite
from temper.orchestrator.config import CurriculumConfig, SuiteConfig
from temper.orchestrator.scheduler import TaskScheduler


def build(curriculum: CurriculumConfig | None = None, cap: int = 1000) -> TaskScheduler:
    suites = [(SuiteConfig(spec="terminal-like", weight=0.6, max_concurrency=cap), ToySuite(n=50, domain="terminal")),
              (SuiteConfig(spec="reasoning", weight=0.4, max_concurrency=cap), ArithmeticSuite(n=50))]
    return TaskScheduler.build(suites, curriculum or CurriculumConfig(enabled=False), seed=0)


def test_weights_mix_suites_60_40() -> None:
    s = build()
    picks = Counter()
    for _ in range(100):
        g = s.next(1)
        picks[g.task.domain] += 1
        s.release(g, [0.5])
    assert picks == {"terminal": 60, "math": 40}


def test_concurrency_limit_per_suite() -> None:
    s = build(cap=8)
    running = [s.next(4) for _ in range(4)]  # 2 groups of 4 fill each suite
    assert all(r is not None for r in running)
    assert s.next(4) is None  # both suites at their sandbox capacity
    s.release(running[0], [1.0, 0.0, 0.0, 0.0])
    again = s.next(4)
    assert again is not None and again.suite_index == running[0].suite_index


def test_curriculum_retires_easy_parks_hopeless_and_skips_quarantined() -> None:
    s = build(CurriculumConfig(min_groups=1, retire_above=1.0, park_below=0.0))
    a, b, c = s.next(1), s.next(1), s.next(1)
    s.release(a, [1.0, 1.0])  # too easy
    s.release(b, [0.0, 0.0])  # hopeless for now
    s.release(c, [0.5, 0.0])
    s.quarantine(c.task.id)
    assert s.pools() == {"new": 97, "hard": 0, "medium": 0, "easy": 0, "retired": 1, "parked": 1, "quarantined": 1}
    seen = set()
    for _ in range(300):
        g = s.next(1)
        seen.add(g.task.id)
        s.release(g, None)
    assert not {a.task.id, b.task.id, c.task.id} & seen
    state = s.state_dict()
    s2 = build(CurriculumConfig(min_groups=1))
    s2.load_state_dict(state)
    assert s2.next(1).task.id == s.next(1).task.id  # the same order after resume
