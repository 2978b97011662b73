"""Runs inside each vLLM worker (`--worker-extension-cls temper.rollout_servers.vllm_worker_extension.
TemperWorkerExtension`), called through the server's `/collective_rpc`: the filesystem weight hand-off
for machines where vLLM's NCCL/IPC weight-transfer engines do not run (CPU, or no shared GPU).

Imported by vLLM's interpreter, not temper's: only torch and safetensors here. Method names carry a
`temper_` prefix because vLLM refuses an extension attribute the worker already has.
"""

import hashlib
from pathlib import Path


class TemperWorkerExtension:
    def temper_load_weights(self, folder: str) -> dict:
        """Load `folder`'s safetensors files (the trainer's full state dict under HF names) into the
        running model in place. vLLM's in-place reload takes checkpoint-format weights (it fuses q/k/v
        and gate/up, skips a tied lm_head) and redoes the processing its kernels did after the first
        load (the CPU backend repacks linear weights, so a plain `load_weights` finds empty params)."""
        from safetensors.torch import safe_open

        files = sorted(Path(folder).glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"{folder}: no .safetensors file to load")
        def tensors():
            for f in files:
                with safe_open(str(f), framework="pt") as fh:
                    for name in fh.keys():  # noqa: SIM118 (safe_open has keys(), not iteration)
                        yield name, fh.get_tensor(name)

        self.model_runner.reload_weights(weights_iterator=tensors(), is_checkpoint_format=True)  # type: ignore[attr-defined]
        return {"files": len(files)}

    def temper_weights_digest(self) -> str:
        """A digest of every parameter's bytes (tests check that an update changed the server's weights)."""
        h = hashlib.sha256()
        for name, p in sorted(self.model_runner.get_model().named_parameters()):  # type: ignore[attr-defined]
            h.update(name.encode())
            h.update(p.detach().float().cpu().numpy().tobytes())
        return h.hexdigest()
