"""PNG plots of a run: reward and pass rate per step, and rollout/training throughput."""

from pathlib import Path

from temper.runtime import pyplot

plt = pyplot()


def write_plots(rows: list[dict[str, float]], folder: Path) -> list[Path]:
    if not rows:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    steps = [r["step"] for r in rows]
    out = []
    for name, keys, ylabel in (("reward.png", ("reward", "pass_rate"), "reward"),
                               ("throughput.png", ("rollout_tok_s", "train_tok_s"), "tokens/s"),
                               ("staleness.png", ("staleness", "staleness_max"), "policy versions")):
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for k in keys:
            ax.plot(steps, [r.get(k, float("nan")) for r in rows], label=k, marker=".")
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(folder / name, dpi=100)
        plt.close(fig)
        out.append(folder / name)
    return out
