"""The example in docs/dashboard.md runs as written (in a scratch folder with `examples/` linked in);
`#>` lines are the output it must print. The dashboard it starts in the background is stopped by PID."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BLOCKS = re.findall(r"```bash\n(.*?)```", (ROOT / "docs" / "dashboard.md").read_text(), re.S)


@pytest.mark.slow
def test_doc_example_runs_as_written(tmp_path: Path) -> None:
    assert BLOCKS
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    for code in BLOCKS:
        expected = [ln[3:] for ln in code.splitlines() if ln.startswith("#> ")]
        script = "\n".join(ln for ln in code.splitlines() if not ln.startswith("#>"))
        r = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=240)
        assert r.returncode == 0, f"{script}\n---\n{r.stdout}\n{r.stderr[-3000:]}"
        assert r.stdout.strip().splitlines() == expected, f"{script}\n---\n{r.stdout}\n{r.stderr[-2000:]}"
