"""Helpers for the device tests: every tensor torch returns while a block runs, a static scan of torch
factory calls, and engine steps driven by hand (for a model on the meta device, where no token can be
read back to sample from)."""

import ast
from collections import Counter
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from temper.engine import LLMEngine

# torch functions that make a new tensor from sizes or host data (not from another tensor)
FACTORIES = {"zeros", "ones", "empty", "full", "arange", "range", "linspace", "logspace", "eye", "tensor", "as_tensor",
             "asarray", "from_numpy", "frombuffer", "rand", "randn", "randint", "randperm", "normal", "empty_strided",
             "scalar_tensor"}


class TensorDevices(TorchFunctionMode):
    """Counts the devices of every tensor torch functions return inside the block, and names the
    functions that returned one on the CPU (the first few)."""

    def __init__(self) -> None:
        super().__init__()
        self.devices: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.on_cpu: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", str(func))
        self.calls[name] += 1
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.devices[t.device.type] += 1
                if t.device.type == "cpu" and len(self.on_cpu) < 10:
                    self.on_cpu.append(name)
        return out


def factory_calls_without_device(root: Path, folders: list[str]) -> list[tuple[str, str, str, int]]:
    """(file, enclosing def, factory, line) of every `torch.<factory>(...)` call under `folders` that passes
    no `device=` or passes the literal "cpu"."""
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()

            def visit(node: ast.AST, scope: tuple[str, ...], rel: str = rel) -> None:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    scope = (*scope, node.name)
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
                        and node.func.attr in FACTORIES):
                    device = next((k.value for k in node.keywords if k.arg == "device"), None)
                    if device is None or (isinstance(device, ast.Constant) and device.value == "cpu"):
                        found.append((rel, ".".join(scope), node.func.attr, node.lineno))
                for child in ast.iter_child_nodes(node):
                    visit(child, scope)

            visit(ast.parse(path.read_text()), ())
    return found


def step_by_hand(engine: LLMEngine, seen: TensorDevices, token: int = 7) -> torch.Tensor:
    """One engine step without the sampler: schedule, run the model (recorded by `seen`), then account
    for the computed tokens and append `token` to every sequence that samples. Returns the logits."""
    engine._admit_incoming()
    batch = engine.scheduler.schedule({})
    with seen:
        logits, _ = engine.runner.run(batch)
    assert batch, "nothing was scheduled"
    for item in batch:
        samples = item.completes
        item.seq.num_computed += item.num_tokens
        engine.blocks.publish(item.seq)
        if samples:
            item.seq.append(token, 0.0, engine.version, None)
    return logits


def engine_tensors(engine: LLMEngine) -> dict[str, torch.Tensor]:
    """Every tensor the engine holds for the model: KV cache (with scales, rotation, workspaces) and
    the decode buffer."""
    cache, buf = engine.cache, engine.runner.buffer
    named = {"cache.k": cache.k, "cache.v": cache.v, **{f"workspace.{k}": t for k, t in cache._ws.items()}}
    for name in ("k_scale", "v_scale", "rotation"):
        if getattr(cache, name, None) is not None:
            named[f"cache.{name}"] = getattr(cache, name)
    if buf.k is not None:
        named["buffer.k"], named["buffer.v"] = buf.k, buf.v
    return named
