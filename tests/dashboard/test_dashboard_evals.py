"""The evaluation, compare and environment-QA pages in headless Chromium, over real folders: the tiny run's
held-out evals, an eval with a long-context grid and an envqa report made by temper's own code. Every figure
on the page is checked against the files (or `compare_runs`) it comes from; bad input is one line, never a 500,
and no page writes into the folders it shows."""

import json
import shutil
from pathlib import Path
from urllib.parse import quote

import httpx
import numpy as np
import pytest
from evals_helpers import make_envqa_report, make_grid_eval

from temper.dashboard.folders import discover
from temper.evals.compare import compare_runs

pytestmark = pytest.mark.e2e


def key_of(root: Path, folder: Path) -> str:
    return next(f.key for f in discover([root]) if f.path == folder)


def shown(text: str, value: float) -> bool:
    """The page's number (3 significant digits) is the file's."""
    return float(text.replace(",", "")) == pytest.approx(value, rel=5e-3, abs=5e-4)


def state(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_eval_page_shows_every_suite_with_its_ci(runs_root: Path, dashboard, page, screenshot) -> None:
    folder = runs_root / "tiny" / "eval" / "after-step-4"
    summary = json.loads((folder / "summary.json").read_text())
    before = state(runs_root / "tiny" / "eval")
    url = dashboard(runs_root)
    assert page.goto(f"{url}/eval?f={quote(key_of(runs_root, folder))}").status == 200
    rows = page.locator("#suites tr.suite")
    assert rows.count() == len(summary["suites"]) > 0
    for spec, e in summary["suites"].items():
        row = page.locator(f'#suites tr.suite[data-suite="{spec}"]')
        assert float(row.get_attribute("data-mean")) == e["mean_reward"]
        assert shown(row.locator(".mean").inner_text(), e["mean_reward"])
        assert shown(row.locator(".low").inner_text(), e["ci_low"])
        assert shown(row.locator(".high").inner_text(), e["ci_high"])
        assert shown(row.locator('.pass[data-k="1"]').inner_text(), e["pass@1"])
        assert int(row.locator(".infra").inner_text().split()[0]) == e["infra_failures"]
        for d, x in e["domains"].items():
            assert shown(page.locator(f'#domains tr[data-suite="{spec}"][data-domain="{d}"] .mean').inner_text(),
                         x["mean_reward"])
    assert page.locator("#usage tr[data-suite]").count() == len(summary["suites"])
    assert page.locator("#heatmap").count() == 0  # no grid in this folder: no section
    screenshot(page, "eval")
    # The compare form offers both eval folders of the run, this one as B after `before`.
    assert page.locator('#compare-form select[name="b"] option:checked').inner_text() == "tiny/eval/after-step-4"
    page.locator("#compare-form button").click()
    page.wait_for_url("**/compare?*")
    assert page.locator("#verdict").count() == 1
    assert state(runs_root / "tiny" / "eval") == before


@pytest.mark.slow
def test_compare_page_is_compare_runs(runs_root: Path, dashboard, page, screenshot) -> None:
    a, b = runs_root / "tiny" / "eval" / "before", runs_root / "tiny" / "eval" / "after-step-4"
    cmp = compare_runs(a, b).to_dict()
    url = dashboard(runs_root)
    resp = page.goto(f"{url}/compare?a={quote(key_of(runs_root, a))}&b={quote(key_of(runs_root, b))}")
    assert resp.status == 200
    assert page.locator("#verdict").inner_text() == cmp["verdict"]
    assert page.locator("#comparison tr.suite").count() == len(cmp["suites"]) > 0
    for spec, e in cmp["suites"].items():
        row = page.locator(f'#comparison tr.suite[data-suite="{spec}"]')
        assert float(row.get_attribute("data-diff")) == e["diff"]
        assert shown(row.locator(".diff").inner_text(), e["diff"])
        assert shown(row.locator(".a").inner_text(), e["a_mean"]) and shown(row.locator(".b").inner_text(), e["b_mean"])
        low, high = row.locator(".ci").inner_text().strip("[]").split(", ")
        assert shown(low, e["ci_low"]) and shown(high, e["ci_high"])
        assert row.locator(".badge").inner_text() == e["change"]
    assert page.locator("#compare-chart").get_attribute("data-points") == str(len(cmp["suites"]))
    screenshot(page, "compare")


def test_grid_eval_heatmap_curves_and_robustness(tmp_path: Path, dashboard, page, screenshot) -> None:
    summary = make_grid_eval(tmp_path / "grid")
    grid, points = summary["longctx_grid"], summary["curves"]["points"]
    url = dashboard(tmp_path)
    assert page.goto(f"{url}/eval?f={quote(key_of(tmp_path, tmp_path / 'grid'))}").status == 200
    for length, scores in zip(grid["lengths"], grid["accuracy"], strict=True):
        cells = page.locator(f'#heatmap tr[data-length="{length}"] td.cell')
        assert [float(c) for c in cells.evaluate_all("cs => cs.map(c => c.dataset.score)")] == scores
    assert page.locator("#effective-length").inner_text() == str(grid["effective_length"])
    curves = page.locator("#curves .chart")
    assert curves.count() >= 3  # latency, cost, memory (tokens too where the solver counts them)
    assert set(curves.evaluate_all("cs => cs.map(c => c.dataset.points)")) == {str(len(points))}
    assert page.locator("#grid-charts .chart").first.get_attribute("data-points") == str(len(grid["lengths"]))
    assert page.locator("#robustness tr").count() == 1 + len(summary["robustness"])
    assert page.locator("#suites th", has_text="pass@2").count() == 1
    page.locator("#heatmap").scroll_into_view_if_needed()
    screenshot(page, "eval-grid")


def test_envqa_page_tasks_histogram_clusters_evidence(tmp_path: Path, dashboard, page, screenshot) -> None:
    out, report = make_envqa_report(tmp_path / "made")
    clusters = json.loads((out / "clusters.json").read_text())
    assert clusters, "the planted near copy should make a cluster"
    bare = tmp_path / "bare"  # the same report without its optional files
    shutil.copytree(out, bare)
    (bare / "clusters.json").unlink()
    (bare / report["tasks"][0]["file"]).unlink()
    before = state(out)
    url = dashboard(out, bare)
    assert page.goto(f"{url}/envqa?f=0/").status == 200

    rows = page.locator("#tasks tbody.task")
    assert rows.count() == len(report["tasks"])
    for t in report["tasks"]:
        row = page.locator(f'#tasks tbody.task[data-path="{t["path"]}"]')
        assert row.get_attribute("data-verdicts") == " ".join(t["verdicts"])
        assert row.locator(".verdicts .badge").all_inner_texts() == t["verdicts"]
    rates = [t["pass_rate"] for t in report["tasks"] if t["pass_rate"] is not None]
    hist = page.locator("#pass-hist")
    expected, _ = np.histogram(rates, bins=[i / 10 for i in range(11)])  # report.py's pass_rates.png bins
    assert hist.get_attribute("data-points") == "10"
    assert [int(c) for c in hist.get_attribute("data-counts").split(",")] == expected.tolist()

    assert page.locator(".cluster").count() == len(clusters)
    for c, el in zip(clusters, page.locator(".cluster").all(), strict=True):
        members = el.locator(".member")
        assert members.evaluate_all("ms => ms.map(m => m.dataset.path)") == c["members"]
        boxes = [m.bounding_box() for m in members.all()]
        assert len({round(b["y"]) for b in boxes}) == 1 and [b["x"] for b in boxes] == sorted(b["x"] for b in boxes)
        for m, path in zip(members.all(), c["members"], strict=True):  # side by side, each with its instruction
            assert m.locator(".instruction").inner_text().strip() == (Path(path) / "instruction.md").read_text().strip()

    screenshot(page, "envqa")

    first = rows.first  # its evidence: the task file, fetched when the row opens
    first.locator("details.evidence summary").click()
    pre = first.locator("pre.evidence-text[data-loaded]")
    pre.wait_for()
    task_file = json.loads((out / report["tasks"][0]["file"]).read_text())
    assert json.loads(pre.inner_text()) == task_file

    dup = page.goto(f"{url}/envqa?f=0/&verdict=duplicate")
    assert dup.status == 200
    assert page.locator("#tasks tbody.task").count() == sum("duplicate" in t["verdicts"] for t in report["tasks"])

    page.goto(f"{url}/envqa?f=1/")  # no clusters.json: no section; a missing task file: one line in its row
    assert page.locator("#tasks tbody.task").count() == len(report["tasks"]) and page.locator(".cluster").count() == 0
    page.locator("#tasks tbody.task").first.locator("details.evidence summary").click()
    page.locator("pre.evidence-text.problem").wait_for()
    assert "missing" in page.locator("pre.evidence-text.problem").inner_text()
    assert state(out) == before


@pytest.mark.slow
def test_bad_input_is_one_line_never_a_500(runs_root: Path, tmp_path: Path, dashboard, page) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(runs_root / "tiny" / "eval" / "before", bad / "corrupt-eval")
    (bad / "corrupt-eval" / "summary.json").write_text('{"run": {}, "suites": {')
    (bad / "corrupt-qa").mkdir()
    (bad / "corrupt-qa" / "report.json").write_text('{"tasks": [')
    (bad / "odd-eval").mkdir()  # valid JSON of the wrong shape
    (bad / "odd-eval" / "summary.json").write_text('{"run": 3, "suites": {"x": 1, "y": {"mean_reward": "high"}}}')
    url = dashboard(runs_root, bad)
    for path, status, words in [
        ("/eval?f=1/corrupt-eval", 422, [str(bad / "corrupt-eval" / "summary.json"), "not valid JSON"]),
        ("/envqa?f=1/corrupt-qa", 422, [str(bad / "corrupt-qa" / "report.json"), "not valid JSON"]),
        ("/eval?f=0/tiny", 404, ["a run folder"]),
        ("/envqa?f=0/tiny/eval/before", 404, ["eval folder, not a"]),
        ("/compare?a=0/tiny&b=0/tiny/eval/before", 404, ["a run folder"]),
        ("/eval?f=0/../../etc", 404, ["no such folder"]),
    ]:
        resp = page.goto(url + path)
        assert resp.status == status, (path, resp.status)
        problems = page.locator(".problem")
        assert problems.count() == 1, (path, problems.all_inner_texts())
        assert all(w in problems.inner_text() for w in words), (path, problems.inner_text())
    odd = page.goto(f"{url}/eval?f=1/odd-eval")
    assert odd.status == 200 and "suite 'x' is not an object" in page.locator(".problem").inner_text()
    assert page.locator('#suites tr.suite[data-suite="y"] .mean').inner_text() == "—"
    api = httpx.get(f"{url}/api/envqa/evidence", params={"f": "0/tiny", "i": 0})
    assert api.status_code == 404 and "run folder" in api.json()["error"]
