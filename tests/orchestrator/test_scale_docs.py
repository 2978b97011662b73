"""The examples in docs/scale.md run as written (in order, in a scratch folder with `examples/` and
`benchmarks/` linked in); `#>` lines are the output they must print. The Ray cluster example gets a free
port and a temp folder of its own, so that it can run beside other clusters on the machine."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from temper.net import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "scale.md"
BLOCKS = re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.S)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_scale_doc_examples_run_as_written(tmp_path: Path) -> None:
    assert len(BLOCKS) >= 5
    work = tmp_path / "work"
    (work / "runs").mkdir(parents=True)
    for name in ("examples", "benchmarks"):
        (work / name).symlink_to(ROOT / name)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "RAY_AUTH_MODE": "disabled"}
    ray_temp = tempfile.mkdtemp(prefix="rsd", dir="/tmp")  # short: Ray's socket paths live under it
    port = str(free_port())
    try:
        for code in BLOCKS:
            expected = [ln[3:] for ln in code.splitlines() if ln.startswith("#> ")]
            script = "\n".join(ln for ln in code.splitlines() if not ln.startswith("#>"))
            script = script.replace("6390", port).replace("/tmp/ray-two", ray_temp)
            r = subprocess.run(["bash", "-e", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                               timeout=600)
            assert r.returncode == 0, f"{script}\n---\n{r.stdout}\n{r.stderr[-3000:]}"
            got = [ln.rstrip() for ln in r.stdout.rstrip().splitlines()]
            assert got == expected, f"{script}\n---\n{r.stdout}\n{r.stderr[-2000:]}"
    finally:
        shutil.rmtree(ray_temp, ignore_errors=True)
