"""Helpers of the dashboard tests: a real run whose episodes make tool calls (an external agent program that
asks the policy, then runs a shell command in the episode's sandbox through TEMPER_EXEC_URL)."""

import sys
from pathlib import Path
from typing import Any

AGENT = """
import os, httpx, openai
reply = openai.OpenAI(max_retries=0).chat.completions.create(model="policy", messages=[
    {"role": "system", "content": "say"}, {"role": "user", "content": os.environ["TEMPER_INSTRUCTION"]}])
text = reply.choices[0].message.content or ""
word = "ok" if len(text) % 2 == 0 else "no"  # the policy's answer decides the command, so rewards vary
httpx.post(os.environ["TEMPER_EXEC_URL"], json={"command": f"echo {word} > /app/done.txt && cat /app/done.txt"},
           headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}).raise_for_status()
print(text)
"""

VERIFIER = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/done.txt 2>/dev/null)" = "ok" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""


def task_folder(root: Path) -> Path:
    d = root / "write-ok"
    for sub in ("tests", "solution", "environment"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "instruction.md").write_text("Write the word ok into /app/done.txt.\n")
    (d / "task.toml").write_text('[metadata]\ndifficulty = "easy"\n')
    (d / "tests" / "test.sh").write_text(VERIFIER)
    (d / "solution" / "solve.sh").write_text("echo ok > /app/done.txt\n")
    return root


def make_tool_run(model: Path, out: Path, tasks: Path) -> dict[str, Any]:
    from temper.orchestrator.config import TrainConfig
    from temper.orchestrator.run_dir import RunDir
    from temper.orchestrator.train import train

    program = out.parent / "agent.py"
    program.write_text(AGENT)
    cfg = TrainConfig.from_recipe({
        "model": str(model), "suites": [{"spec": f"terminal:path={task_folder(tasks)}"}],
        "algorithm": {"optim": {"lr": 0.05, "total_steps": 100, "min_lr_ratio": 1.0},
                      "checkpoint": {"keep_last": 2, "keep_best": False}},
        "engine": {"kv_budget_bytes": 16_000_000, "max_num_seqs": 16},
        "agent": {"kind": "external", "command": [sys.executable, str(program)], "max_turn_tokens": 3},
        "orchestrator": {"group_size": 8, "batch_groups": 1, "max_staleness": 0, "concurrency": 4},
        "eval": {"suite": None}, "max_steps": 2, "out": str(out),
        "logging": {"progress": False, "plots": False}})
    return train(cfg, RunDir.create(cfg))
