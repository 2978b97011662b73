"""Reports of a run and of a comparison, in Markdown and HTML from the same blocks, with the PNG
plots next to them (linked from both)."""

import html
from pathlib import Path
from typing import Any

from temper.evals import plots

Block = tuple[str, Any]  # ("h1"|"h2"|"p", text) | ("table", (headers, rows)) | ("img", (file, alt))


def _f(x: Any, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def render_md(blocks: list[Block]) -> str:
    out = []
    for kind, body in blocks:
        if kind in ("h1", "h2"):
            out.append(f"{'#' * int(kind[1])} {body}")
        elif kind == "p":
            out.append(body)
        elif kind == "table":
            headers, rows = body
            out.append("\n".join(["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers),
                                  *("| " + " | ".join(_f(c).replace("|", "\\|") for c in r) + " |" for r in rows)]))
        elif kind == "img":
            out.append(f"![{body[1]}]({body[0]})")
    return "\n\n".join(out) + "\n"


def render_html(blocks: list[Block], title: str) -> str:
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
           "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse}"
           "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child{text-align:left}"
           "img{max-width:100%}</style></head><body>"]
    for kind, body in blocks:
        if kind in ("h1", "h2"):
            out.append(f"<{kind}>{html.escape(body)}</{kind}>")
        elif kind == "p":
            out.append(f"<p>{html.escape(body)}</p>")
        elif kind == "table":
            headers, rows = body
            out.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers) + "</tr>")
            out += ["<tr>" + "".join(f"<td>{html.escape(_f(c))}</td>" for c in r) + "</tr>" for r in rows]
            out.append("</table>")
        elif kind == "img":
            out.append(f"<p><img src='{html.escape(body[0])}' alt='{html.escape(body[1])}'></p>")
    return "\n".join([*out, "</body></html>"]) + "\n"


def _write(folder: Path, name: str, blocks: list[Block], title: str) -> tuple[Path, Path]:
    md, page = folder / f"{name}.md", folder / f"{name}.html"
    md.write_text(render_md(blocks))
    page.write_text(render_html(blocks, title))
    return md, page


def _ks(entries: list[dict[str, Any]]) -> list[str]:
    return sorted({k for e in entries for k in e if k.startswith("pass@")}, key=lambda k: int(k[5:]))


def run_blocks(folder: Path, summary: dict[str, Any]) -> list[Block]:
    run = summary.get("run", {})
    blocks: list[Block] = [("h1", "Evaluation report"),
                           ("p", f"solver: {run.get('solver')}, model: {run.get('model')}, samples per task: "
                                 f"{run.get('samples')}, temperature: {run.get('temperature')}, "
                                 f"task limit: {run.get('limit') or 'none'}, at {run.get('time')}.")]
    suites = summary.get("suites", {})
    if suites:
        ks = _ks(list(suites.values()))
        rows = [[s, e["n"], e["mean_reward"], f"[{_f(e['ci_low'])}, {_f(e['ci_high'])}]", *(e.get(k) for k in ks),
                 e["infra_failures"], (e.get("usage") or {}).get("cost_total")] for s, e in suites.items()]
        blocks += [("h2", "Suites"), ("table", (["suite", "n", "mean reward", "95% CI", *ks, "infra failures",
                                                 "cost ($)"], rows))]
        if plots.suite_scores(summary, folder / "suites.png"):
            blocks.append(("img", ("suites.png", "mean reward per suite")))
        drows = [[f"{s} / {d}", e["n"], e["mean_reward"], f"[{_f(e['ci_low'])}, {_f(e['ci_high'])}]",
                  e.get("pass@1")] for s, se in suites.items() for d, e in se["domains"].items()]
        blocks += [("h2", "Domains"), ("table", (["suite / domain", "n", "mean reward", "95% CI", "pass@1"], drows))]
        urows = [[s, *(e["usage"].get(k) for k in ("tokens_in_mean", "tokens_out_mean", "latency_s_mean",
                                                     "ttft_s_mean", "tpot_s_mean", "cost_per_item"))]
                 for s, e in suites.items()]
        blocks += [("h2", "Usage"), ("table", (["suite", "tokens in", "tokens out", "latency (s)", "TTFT (s)",
                                                "s/token", "cost/item ($)"], urows))]
    if pairs := summary.get("robustness"):
        rows = [[p["clean"], p["noisy"], p["clean_mean"], p["noisy_mean"], p["drop"],
                 f"[{_f(p['ci_low'])}, {_f(p['ci_high'])}]", p["paired"]] for p in pairs]
        blocks += [("h2", "Robustness: clean vs noisy"),
                   ("table", (["clean", "noisy", "clean mean", "noisy mean", "drop", "95% CI", "paired"], rows))]
    if grid := summary.get("longctx_grid"):
        plots.heatmap(grid, folder / "longctx_heatmap.png")
        plots.depth_profile(grid, folder / "longctx_profile.png")
        eff, ruler = grid["effective_length"], grid.get("effective_length_ruler")
        blocks += [("h2", "Long context"),
                   ("p", f"Effective context length: {eff if eff is not None else 'undefined'} by NoLiMa's rule "
                         f"(score >= {grid['threshold']:g} x the short-context score {_f(grid['base_score'])}); "
                         f"{ruler if ruler is not None else 'undefined'} by RULER's (score >= "
                         f"{grid.get('ruler_threshold', 0.856):g})."),
                   ("table", (["length", *(f"depth {d:g}" for d in grid["depths"]), "all"],
                              [[L, *row, grid["by_length"][str(L)]]
                               for L, row in zip(grid["lengths"], grid["accuracy"], strict=True)])),
                   ("img", ("longctx_heatmap.png", "accuracy per length and depth")),
                   ("img", ("longctx_profile.png", "accuracy by depth and by length"))]
    if curves := summary.get("curves"):
        plots.cost_curves(curves, folder / "curves.png")
        keys = ("length", "prompt_tokens", "ttft_s", "tpot_s", "peak_mem_mb", "kv_cache_mb", "cost_per_item")
        blocks += [("h2", "Latency and cost by context length"),
                   ("table", (list(keys), [[p.get(k) for k in keys] for p in curves["points"]])),
                   ("img", ("curves.png", "latency, memory and cost by context length"))]
    return blocks


def write_run_report(folder: Path, summary: dict[str, Any]) -> tuple[Path, Path]:
    return _write(Path(folder), "report", run_blocks(Path(folder), summary), "temper eval report")


def compare_blocks(folder: Path, cmp: dict[str, Any]) -> list[Block]:
    blocks: list[Block] = [("h1", "Run comparison"), ("p", f"A = {cmp['a']}, B = {cmp['b']}."),
                           ("p", f"Verdict: {cmp['verdict']}")]
    rows = []
    for s, e in cmp["suites"].items():
        rows.append([s, e["a_mean"], e["b_mean"], e["diff"], f"[{_f(e['ci_low'])}, {_f(e['ci_high'])}]",
                     e["method"], e["change"]])
        rows += [[f"  {s} / {d}", x["a_mean"], x["b_mean"], x["diff"], f"[{_f(x['ci_low'])}, {_f(x['ci_high'])}]",
                  x["method"], x["change"]] for d, x in e["domains"].items() if len(e["domains"]) > 1]
    blocks += [("table", (["suite / domain", "A", "B", "B - A", "95% CI", "pairing", "change"], rows))]
    if plots.compare_diffs(cmp, folder / "compare.png"):
        blocks.append(("img", ("compare.png", "change per suite")))
    return blocks


def write_compare_report(folder: Path, cmp: dict[str, Any]) -> tuple[Path, Path]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return _write(folder, "compare", compare_blocks(folder, cmp), "temper compare report")
