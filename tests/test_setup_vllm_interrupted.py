"""scripts/setup_vllm.sh killed half-way through an install (holding its lock) leaves a venv temper refuses;
the next run takes the lock over, removes it and installs anew. A small package stands in for vLLM
(VLLM_SPEC) in a temporary venv (VLLM_VENV): the same script, minutes shorter."""

import re
import subprocess

import pytest
from interrupt_helpers import env, kill_at_pause, run, start

from temper.errors import TemperError
from temper.rollout_servers.vllm_config import VllmConfig
from temper.rollout_servers.vllm_server import vllm_python


@pytest.mark.timeout(300)
def test_an_install_killed_half_way_is_refused_then_redone(tmp_path):
    venv = tmp_path / "venv-vllm"
    script, environ = ["bash", "scripts/setup_vllm.sh"], env(VLLM_VENV=str(venv), VLLM_SPEC="iniconfig")
    first = start(script, {**environ, "TEMPER_TEST_PAUSE_AT": "vLLM, half installed"})
    kill_at_pause(first, timeout=200)
    with pytest.raises(TemperError, match=r"venv-vllm: the vLLM install there was interrupted; rerun"):
        vllm_python(VllmConfig(python=str(venv / "bin" / "python")))

    done = run(script, environ, timeout=250)
    out = done.stdout
    assert done.returncode == 0, out
    assert re.search(rf"taking over .*venv-vllm\.lock from pid {first.pid} .*which is gone", out), out
    assert f"removing {venv}: an interrupted install" in out, out
    assert not (venv / ".temper-building").exists() and (venv / ".temper-setup").read_text().startswith("custom")
    assert vllm_python(VllmConfig(python=str(venv / "bin" / "python"))) == venv / "bin" / "python"
    subprocess.run([venv / "bin" / "python", "-c", "import iniconfig"], check=True, timeout=60)
    assert "ready: iniconfig" in run(script, environ, timeout=60).stdout  # the next run finds it done
