"""Run a few trainer steps (1 process, or N under torchrun with FSDP2 on gloo) and save losses and weights.

Used by test_rl_fsdp.py: `python fsdp_worker.py OUT` or `torchrun --nproc_per_node 2 fsdp_worker.py OUT`; and by
test_rl_context_parallel.py: `... OUT CONTEXT_PARALLEL MICRO_BATCH_TOKENS SHARE_PROMPTS` (samples longer than the
budget are split across CONTEXT_PARALLEL ranks; SHARE_PROMPTS 0 lays every sample out whole, as a split one is).
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from conftest import make_model, make_trajectories

from temper.rl import RLConfig, Trainer
from temper.rl import distributed as dist


def main(out: Path, context_parallel: int = 1, micro_batch_tokens: int = 40, share_prompts: int = 1) -> None:
    torch.set_num_threads(1)
    dist.init_from_env("gloo")
    cfg = RLConfig()
    cfg.optim.lr = 1e-2
    cfg.trainer.micro_batch_tokens = micro_batch_tokens  # several micro-batches, split over the ranks
    cfg.trainer.world_size, cfg.trainer.context_parallel = dist.world_size(), context_parallel
    cfg.trainer.share_prompts = bool(share_prompts)
    cfg.loss.aggregation = "seq_mean"
    trainer = Trainer(make_model(), cfg)
    metrics = [trainer.step(make_trajectories(seed=s, groups=4, obs=True)).as_metrics() for s in range(3)]
    sharded = all(hasattr(p, "full_tensor") for p in trainer.model.parameters())  # FSDP2 DTensor shards
    state = trainer.policy_state_dict()
    ckpt = trainer.save_checkpoint(out / "ckpt", metrics[-1])
    if dist.rank() == 0:
        result = {"metrics": metrics, "state": state, "world": dist.world_size(), "sharded": sharded,
                  "ckpt": str(ckpt), "context_split": sum(m["context_split"] for m in metrics)}
        torch.save(result, out / "result.pt")
    if dist.is_distributed():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]), *(int(a) for a in sys.argv[2:]))
