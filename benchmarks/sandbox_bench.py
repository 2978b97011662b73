"""Sandbox speed and density, side by side with a bare `subprocess.run` of the same command.

    .venv/bin/python benchmarks/sandbox_bench.py [--isolation bwrap] [--idle 200] [--n 200] [--image]

With --image it adds image sandboxes on the example task image (examples/images/greet, built by podman on
its Debian base), side by side with `podman run` of the same image (runc; the `image_*` and `podman_*`
figures): cold start to a first command's output (and start to close, teardown included), warm exec against
the host-filesystem sandbox, reset, 100 idle image sandboxes' memory, the image's build time and disk, and the
disk two images with one base share.

Prints a table, then one JSON line (the last line) with the figures and target pass/fail.
Targets (2-core machine): warm /bin/true p50 <= 2x bare and <= 5 ms; cold start p50 <= 50 ms;
reset of a 1000-file template <= 10 ms; 200 idle warm sandboxes within 2 GiB.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from temper.images import layers
from temper.sandbox import Sandbox, SandboxConfig, SandboxPool


def timed(fns: list[Callable[[], object]], n: int, warmup: int = 5) -> list[list[float]]:
    """Time each function n times, interleaved, so that a shared, noisy host affects all alike."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    out: list[list[float]] = [[] for _ in fns]
    for _ in range(n):
        for fn, xs in zip(fns, out, strict=True):
            t = time.perf_counter()
            fn()
            xs.append((time.perf_counter() - t) * 1e3)
    return out


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 3)


def mem_available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def sandbox_mib(sb: Sandbox) -> float:
    """What one sandbox costs: its cgroup's memory (supervisor, kernel objects, tmpfs) plus the
    PSS of bwrap's outer process, which stays outside the cgroup; without cgroups, PSS only."""
    sup = sb._sup
    assert sup is not None and sup._proc is not None
    outer = [sup._proc.pid]
    cg = sup.cgroup
    if cg is not None and "memory" in cg.dirs:
        d = cg.dirs["memory"]
        f = d / ("memory.current" if cg.version == "v2" else "memory.usage_in_bytes")
        return int(f.read_text()) / 2**20 + pss_mib(outer)
    inner = [int(p) for p in Path(f"/proc/{outer[0]}/task/{outer[0]}/children").read_text().split()] \
        if Path(f"/proc/{outer[0]}/task/{outer[0]}/children").exists() else []
    return pss_mib(outer + inner)


def image_figures(work: Path, cfg: SandboxConfig, n: int) -> dict[str, object]:
    """Image sandboxes on the example task's image, beside `podman run` of it and the host-filesystem sandbox."""
    from temper.images import ImagesConfig, ImageStore
    from temper.sandbox import ImageRoot

    store = ImageStore(ImagesConfig())
    example = Path(__file__).resolve().parents[1] / "examples/images/greet"
    image = store.build_task(example)
    other = work / "tasks/other"
    (other / "environment").mkdir(parents=True)
    (other / "environment/Dockerfile").write_text("FROM python:3.13-slim-bookworm\nRUN echo other > /other\n")
    second = store.build_task(other)
    use = store.disk_use()
    one, two = use[f"image:{image.key}"], use[f"image:{second.key}"]
    shared = sum(layers.disk_bytes(store.layer_dir(d)) for d in set(image.layers) & set(second.layers))
    root = ImageRoot(layers=store.layer_dirs(image), env=image.env, workdir=image.workdir, user=image.user,
                     uid_base=store.cfg.uid_base)
    icfg = cfg.model_copy(update={"image": root})
    # Cold start = from nothing running to a first command's output; then the teardown, timed apart. Both
    # sides alike: podman's first line of output, then the rest of its `run --rm`.
    cold, cold_whole = [], []
    for _ in range(30):
        t = time.perf_counter()
        sb = Sandbox(icfg)
        assert sb.exec(["echo", "ready"]).stdout == b"ready\n"
        cold.append((time.perf_counter() - t) * 1e3)
        sb.close()
        cold_whole.append((time.perf_counter() - t) * 1e3)
    ref = f"localhost/temper-task/greet:{image.key}"
    podman = [*store.tool.argv0, "run", "--rm", "--runtime", "runc", "--network", "none",
              "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", ref, "echo", "ready"]
    subprocess.run(podman, check=True, capture_output=True)  # the first run sets its storage up
    pod, pod_whole = [], []
    for _ in range(15):
        t = time.perf_counter()
        run = subprocess.Popen(podman, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert run.stdout is not None and run.stdout.readline() == b"ready\n"
        pod.append((time.perf_counter() - t) * 1e3)
        assert run.wait() == 0
        pod_whole.append((time.perf_counter() - t) * 1e3)
        run.stdout.close()
    with Sandbox(icfg) as isb, Sandbox(cfg) as hsb:
        for _ in range(20):
            isb.exec(["true"])
            hsb.exec(["/bin/true"])
        host_warm, image_warm = timed([lambda: hsb.exec(["/bin/true"]), lambda: isb.exec(["true"])], n)
        resets = []
        for _ in range(30):
            isb.exec("echo changed > /app/greet.py; mkdir -p /srv/x && touch /srv/x/f; sleep 60 &")
            resets.append(isb.reset() * 1e3)
        assert isb.exec("cat /app/greet.py").stdout.startswith(b"import os")
    idle = [Sandbox(icfg.model_copy(update={"audit": False})) for _ in range(100)]
    time.sleep(1.0)
    per = [sandbox_mib(sb) for sb in idle]
    alive = sum(1 for sb in idle if sb.exec(["true"]).exit_code == 0)
    for sb in idle:
        sb.close()
    ic, pc = pct(cold, 0.5), pct(pod, 0.5)
    return {
        "image": image.name, "image_layers": len(image.layers), "image_build_s": image.build_s,
        "image_disk_mib": round(one / 2**20, 1), "second_image_disk_mib": round(two / 2**20, 1),
        "two_images_layer_store_mib": round(use["layers"] / 2**20, 1),
        "two_images_shared_mib": round(shared / 2**20, 1),
        "image_cold_start_p50_ms": ic, "image_cold_start_p99_ms": pct(cold, 0.99),
        "podman_cold_start_p50_ms": pc, "podman_cold_start_p99_ms": pct(pod, 0.99),
        "podman_vs_image_cold_start": round(pc / ic, 1),
        "image_start_to_close_p50_ms": pct(cold_whole, 0.5), "podman_run_rm_p50_ms": pct(pod_whole, 0.5),
        "podman_vs_image_start_to_close": round(pct(pod_whole, 0.5) / pct(cold_whole, 0.5), 1),
        "host_warm_exec_p50_ms": pct(host_warm, 0.5), "image_warm_exec_p50_ms": pct(image_warm, 0.5),
        "image_vs_host_warm_exec": round(pct(image_warm, 0.5) / pct(host_warm, 0.5), 2),
        "image_reset_ms": pct(resets, 0.5), "image_reset_p99_ms": pct(resets, 0.99),
        "image_idle_100_alive": alive, "image_idle_sandbox_mib": round(statistics.mean(per), 2),
        "image_idle_100_total_mib": round(sum(per), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--isolation", default="auto")
    ap.add_argument("--n", type=int, default=300, help="samples per latency figure")
    ap.add_argument("--idle", type=int, default=200, help="idle warm sandboxes for the density figure")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results/sandbox_bench/latest.json")
    ap.add_argument("--image", action="store_true", help="add the image sandbox figures (needs podman, runc)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="temper-bench-"))
    work.chmod(0o755)
    cfg = SandboxConfig(isolation=args.isolation, run_dir=work / "run", state_dir=work / "state", pool_size=2)
    tpl = work / "template"
    for i in range(1000):
        d = tpl / f"d{i // 100}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.py").write_text(f"x = {i}\n")
    py = shutil.which("python3", path="/usr/bin") or "python3"
    r: dict[str, object] = {}
    try:
        cold = []
        for _ in range(20):
            t = time.perf_counter()
            sb = Sandbox(cfg)
            cold.append((time.perf_counter() - t) * 1e3)
            sb.close()
        with SandboxPool(cfg) as pool:
            pool.wait_ready()
            sb = pool.acquire()
            served_warm = sb.warm
            pool.wait_ready()  # the pool refills in the background: let it finish before timing
            for _ in range(20):  # and fault the spawner's pages in
                sb.exec(["/bin/true"])
            bare_true, warm_true = timed([lambda: subprocess.run(["/bin/true"]), lambda: sb.exec(["/bin/true"])],
                                         args.n)
            bare_py, warm_py = timed([lambda: subprocess.run([py, "-c", "pass"]),
                                      lambda: sb.exec(["python3", "-c", "pass"])], max(args.n // 3, 30))
            pool.release(sb)
        mode = sb.mode
        with Sandbox(cfg, template=tpl) as sb:
            overlay = sb.overlay

            def dirty_reset() -> None:
                sb.exec("echo changed > d0/f0.py; rm d1/f100.py; touch new")
                t = time.perf_counter()
                sb.reset()
                resets.append((time.perf_counter() - t) * 1e3)

            resets: list[float] = []
            for _ in range(30):
                dirty_reset()
            assert sb.exec("cat d0/f0.py; ls | wc -l").stdout == b"x = 0\n10\n"
        # throughput: 2 workers, each with its own warm sandbox
        boxes = [Sandbox(cfg) for _ in range(2)]
        for b in boxes:  # warm up: the first commands of a new sandbox fault its pages in
            for _ in range(20):
                b.exec(["/bin/true"])
        count = [0, 0]
        stop = time.perf_counter() + 3.0

        def worker(i: int) -> None:
            while time.perf_counter() < stop:
                boxes[i].exec(["/bin/true"])
                count[i] += 1

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for b in boxes:
            b.close()
        execs_per_s = sum(count) / 3.0
        # density: N idle warm sandboxes alive at once
        before = mem_available_mib()
        idle: list[Sandbox] = []
        t0 = time.perf_counter()
        lock = threading.Lock()

        def starter() -> None:
            while True:
                with lock:
                    if len(idle) >= args.idle:
                        return
                    idle.append(None)  # type: ignore[arg-type]
                    slot = len(idle) - 1
                idle[slot] = Sandbox(cfg.model_copy(update={"audit": False}))

        ts = [threading.Thread(target=starter) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        start_all_s = time.perf_counter() - t0
        time.sleep(1.0)
        used = before - mem_available_mib()  # host-wide: noisy when other work runs
        per_sandbox = [sandbox_mib(sb) for sb in idle]
        alive = sum(1 for sb in idle if sb.exec(["/bin/true"]).exit_code == 0)
        for sb in idle:
            sb.close()
        bt, wt = pct(bare_true, 0.5), pct(warm_true, 0.5)
        r = {
            "isolation": mode,
            "bare_true_p50_ms": bt, "bare_true_p99_ms": pct(bare_true, 0.99),
            "warm_true_p50_ms": wt, "warm_true_p99_ms": pct(warm_true, 0.99),
            "warm_vs_bare_ratio": round(wt / bt, 2),
            "bare_python_p50_ms": pct(bare_py, 0.5), "bare_python_p99_ms": pct(bare_py, 0.99),
            "warm_python_p50_ms": pct(warm_py, 0.5), "warm_python_p99_ms": pct(warm_py, 0.99),
            "cold_start_p50_ms": pct(cold, 0.5), "cold_start_p99_ms": pct(cold, 0.99),
            "reset_ms": pct(resets, 0.5), "reset_p99_ms": pct(resets, 0.99), "reset_overlay": overlay,
            "execs_per_s": round(execs_per_s, 1),
            "idle_sandboxes": args.idle, "idle_alive": alive, "idle_start_all_s": round(start_all_s, 1),
            "idle_sandbox_mib": round(statistics.mean(per_sandbox), 2),
            "idle_total_mib": round(sum(per_sandbox), 1),
            "idle_memavailable_drop_mib": round(used, 1), "served_warm": served_warm,
            "load_avg_1m": os.getloadavg()[0],
        }
        r["targets"] = {
            "warm_true_le_2x_bare": wt <= 2 * bt,
            "warm_true_le_5ms": wt <= 5.0,
            "cold_start_le_50ms": r["cold_start_p50_ms"] <= 50.0,
            "reset_le_10ms": r["reset_ms"] <= 10.0,
            "idle_200_within_2gib": alive >= 200 and sum(per_sandbox) * 200 / args.idle <= 2048,
        }
        if args.image:
            img = image_figures(work, cfg, args.n)
            r.update(img)
            r["targets"].update({  # type: ignore[union-attr]
                "image_cold_start_le_50ms": img["image_cold_start_p50_ms"] <= 50.0,
                "image_cold_start_5x_faster_than_podman": img["podman_vs_image_cold_start"] >= 5.0,
                "image_warm_exec_le_1_2x_host": img["image_vs_host_warm_exec"] <= 1.2,
                "image_reset_le_5ms": img["image_reset_ms"] <= 5.0,
            })
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table = Table("figure", "value", title=f"temper sandbox benchmark ({r.get('isolation')})")
    for k, v in r.items():
        if k != "targets":
            table.add_row(k, str(v))
    for k, v in r["targets"].items():  # type: ignore[union-attr]
        table.add_row(f"target {k}", "met" if v else "MISSED")
    Console().print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(r, indent=1) + "\n")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
