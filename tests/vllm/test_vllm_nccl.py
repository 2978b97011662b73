"""`weight_sync: nccl` (vLLM's NCCL weight transfer, GPU only) as far as a CPU machine can check it:
the weight source temper hands vLLM's trainer engine meets that engine's contract (checked by vLLM's
own code), the managed servers' command line parses in vLLM to an NCCL weight-transfer config, and
on a machine without CUDA the choice is one line before any server starts. The broadcast itself
needs CUDA: `scripts/gpu_check.sh` runs it where a GPU is."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, VLLM_PYTHON
from vllm_helpers import tiny_vllm_recipe

from temper.rollout_servers.vllm_config import VllmConfig
from temper.rollout_servers.vllm_nccl_sync import vllm_importable
from temper.rollout_servers.vllm_server import server_command

pytestmark = [pytest.mark.timeout(180), pytest.mark.e2e]
DOC = REPO / "docs" / "rollout_servers.md"

# Runs in vLLM's interpreter: temper's source against vLLM's trainer engine and its CLI parser.
CONTRACT = r"""
import json, sys
import torch
from safetensors.torch import load_file
from vllm.distributed.weight_transfer.base import layerwise_groups
from vllm.distributed.weight_transfer.nccl_engine import (NCCLTrainerWeightTransferEngine as Engine,
                                                          NCCLWeightTransferUpdateInfo)
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
from temper.rollout_servers.vllm_nccl_sync import state_dict_source

model, cmd = sys.argv[1], json.loads(sys.argv[2])
state = load_file(model + "/model.safetensors")
source = state_dict_source(state, "cpu")
meta = source.metadata()
sent = list(Engine._checked_iter(source, meta))            # raises where iteration and metadata disagree
info = NCCLWeightTransferUpdateInfo(names=[m.name for m in meta],
                                    dtype_names=[str(m.dtype).split(".")[-1] for m in meta],
                                    shapes=[list(m.shape) for m in meta])
source.state = {k: v + 1 for k, v in state.items()}        # the next push: same names, new values
second = dict(Engine._checked_iter(source, meta))
source.state = {**state, next(iter(state)): torch.zeros(3)}  # a shape vLLM did not size a buffer for
try:
    list(Engine._checked_iter(source, meta))
    caught = ""
except ValueError as exc:
    caught = str(exc)
args = make_arg_parser(FlexibleArgumentParser()).parse_args(cmd[3:])
wt = AsyncEngineArgs.from_cli_args(args).weight_transfer_config
changed = all(torch.equal(second[k], state[k] + 1) for k in state)
print(json.dumps({"names": [n for n, _ in sent], "state": sorted(state), "groups": len(layerwise_groups(info.names)),
                  "dtypes": sorted(set(info.dtype_names)), "changed": changed,
                  "caught": caught, "backend": getattr(wt, "backend", None), "tp": args.tensor_parallel_size}))
"""


def test_the_nccl_weight_source_meets_vllms_trainer_engine_contract(vllm_toy: Path):
    cmd = server_command(vllm_toy, VllmConfig(weight_sync="nccl", tensor_parallel_size=2), 8000, "float32")
    assert cmd[cmd.index("--weight-transfer-config") + 1] == '{"backend": "nccl"}'
    r = subprocess.run([str(VLLM_PYTHON), "-c", CONTRACT, str(vllm_toy), json.dumps(cmd)], capture_output=True,
                       text=True, timeout=150, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert sorted(got["names"]) == got["state"] and got["dtypes"] == ["float32"]  # every tensor, once
    assert got["groups"] >= 3  # embeddings, one per decoder layer, the final norm: vLLM transfers per group
    assert got["changed"]  # a later push sends the state it is given, not the first one's
    assert "disagrees with iteration" in got["caught"]
    assert got["backend"] == "nccl" and got["tp"] == 2  # vLLM reads our flags as meant


def test_nccl_without_cuda_is_one_line_before_any_server_starts(vllm_toy: Path, tmp_path: Path):
    """docs/rollout_servers.md's NCCL example on a machine without CUDA: the line the page shows."""
    section = DOC.read_text().split("### Weights over NCCL")[1]
    example = yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))["orchestrator"]
    shown = re.search(r"```text\n(.*?)\n```", section, re.S).group(1)
    run = tmp_path / "run"
    (tmp_path / "cfg.json").write_text(json.dumps(tiny_vllm_recipe(vllm_toy, run, vllm=example["vllm"])))
    r = subprocess.run([sys.executable, "-m", "temper", "train", "--config", str(tmp_path / "cfg.json")],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""})
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    if vllm_importable():  # a machine with vLLM in temper's venv misses CUDA only
        shown = re.sub(r" and vLLM importable by .*?venv\)", "", shown)
    assert lines[0] == shown
    assert not (run / "vllm" / "servers.json").exists() and not (run / "metrics.jsonl").exists()
