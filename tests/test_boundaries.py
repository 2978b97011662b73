"""The package boundaries of ../shared/DESIGN.md, checked on the source and on a fresh interpreter."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

TEMPER = Path(__file__).resolve().parents[1] / "temper"

# package -> temper packages it must never import (directly, at any depth of its modules)
FORBIDDEN = {
    "generation": {"engine", "models", "serve", "orchestrator", "rl", "evals", "envqa", "agent", "envs", "sandbox"},
    "agent": {"engine", "models", "serve", "orchestrator", "rl", "evals", "envqa"},
    "envs": {"engine", "models", "serve", "orchestrator", "rl", "evals", "envqa", "agent"},
    "sandbox": {"engine", "models", "serve", "orchestrator", "rl", "evals", "envqa", "agent", "envs", "generation"},
    "models": {"engine", "serve", "orchestrator", "rl", "evals", "envqa", "agent", "envs", "sandbox"},
    "rl": {"engine", "serve", "orchestrator", "evals", "envqa", "agent", "envs", "sandbox"},
    "evals": {"orchestrator", "serve", "envqa"},
    "envqa": {"orchestrator", "serve"},
    # external agent programs: above agent, beside serve (whose request modules it uses), never the engine
    "external": {"engine", "models", "orchestrator", "rl", "evals", "envqa"},
    "rollout_servers": {"engine", "models", "serve", "orchestrator", "rl", "evals", "envqa", "agent", "envs",
                        "sandbox"},
    # a reader of the folders the others write: their file formats and pure helpers (tokenizer, advantages,
    # compare), never a component that runs (engine, trainer loop, sandboxes, agents, servers)
    # temper's C++ kernels: a leaf that models and engine both use
    "native": {"engine", "models", "serve", "orchestrator", "rl", "evals", "envqa", "agent", "envs", "sandbox",
               "generation", "external", "rollout_servers", "dashboard", "config", "cli"},
    "dashboard": {"engine", "serve", "orchestrator", "agent", "envs", "sandbox", "external", "rollout_servers",
                  "generation"},
}


def imported_temper_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {n.split(".")[1] for n in names if n.startswith("temper.") and n.count(".") >= 1}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_stay_inside_its_boundary(package: str) -> None:
    offenders = []
    for path in sorted((TEMPER / package).rglob("*.py")):
        if "tasks" in path.relative_to(TEMPER).parts:  # task data (files run inside sandboxes)
            continue
        bad = imported_temper_packages(path) & FORBIDDEN[package]
        offenders += [f"{path.relative_to(TEMPER.parent)} imports temper.{b}" for b in sorted(bad)]
    assert not offenders, "\n".join(offenders)


def test_the_vllm_worker_extension_imports_only_what_vllms_venv_has() -> None:
    """It runs inside vLLM's interpreter (.venv-vllm), where temper's dependencies are not installed."""
    path = TEMPER / "rollout_servers" / "vllm_worker_extension.py"
    tree = ast.parse(path.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert names == {"hashlib", "pathlib", "safetensors.torch"}, names
    init = ast.parse((TEMPER / "rollout_servers" / "__init__.py").read_text())
    assert not [n for n in ast.walk(init) if isinstance(n, ast.Import | ast.ImportFrom)]  # imported first


def _modules_after_import(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return set(out.stdout.split())


def test_the_generation_boundary_imports_no_torch_and_no_engine() -> None:
    mods = _modules_after_import("temper.generation")
    assert "temper.generation.remote_client" in mods  # the check saw the whole package
    assert "torch" not in mods
    assert not {m for m in mods if m.startswith("temper.engine")}


def test_agents_and_environments_load_without_the_engine() -> None:
    mods = _modules_after_import("temper.agent, temper.envs, temper.envs.suites")
    assert "temper.agent.loop" in mods and "temper.envs.suites.terminal" in mods
    assert not {m for m in mods if m.startswith(("temper.engine", "temper.models", "temper.serve"))}


def test_the_external_agent_endpoint_loads_without_the_engine() -> None:
    """It speaks serve's request schemas and chat rendering, which must not pull the engine in."""
    mods = _modules_after_import("temper.external.external_episode")
    assert "temper.serve.chat" in mods and "temper.serve.constraints" in mods
    assert not {m for m in mods if m.startswith(("temper.engine", "temper.models", "temper.serve.variants"))}
