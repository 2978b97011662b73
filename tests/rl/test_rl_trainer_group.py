"""TrainerGroup: two spawned FSDP2 ranks (gloo) behind the Trainer interface; their sharded checkpoint loads
into one process; an exception inside a rank is one TemperError line naming it, and every rank is stopped."""

import socket

import pytest
import torch
from conftest import make_model, make_trajectories

from temper.errors import TemperError
from temper.models import save_model
from temper.models.loading import load_model
from temper.models.toy import toy_tokenizer
from temper.rl import RLConfig, SFTConfig, Trainer
from temper.rl.trainer_group import TrainerGroup

pytestmark = pytest.mark.e2e


def _cfg() -> RLConfig:
    cfg = RLConfig()
    cfg.optim.lr = 1e-2
    cfg.trainer.micro_batch_tokens = 40  # several micro-batches, split over the ranks
    cfg.loss.aggregation = "seq_mean"
    return cfg


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_group_steps_like_one_trainer_saves_shards_and_names_a_failing_rank(tmp_path):
    folder = save_model(make_model(), toy_tokenizer(), tmp_path / "model")
    local = Trainer(load_model(folder).model, _cfg())
    group = TrainerGroup(str(folder), _cfg(), 2, tmp_path / "logs")
    try:
        assert len(set(group.pids)) == 2 and all(p.is_alive() for p in group.procs)
        assert group.nodes == [socket.gethostname()] * 2  # where the ranks run (the audit log's trainer_nodes)
        for s in range(2):
            data = make_trajectories(seed=s, groups=4, obs=True)
            want, got = local.step(data), group.step(data)
            assert got.update.loss == pytest.approx(want.update.loss, rel=1e-4, abs=1e-6)
            assert got.policy_version == group.policy_version == s + 1
        for name, w in local.policy_state_dict().items():
            torch.testing.assert_close(group.policy_state_dict()[name], w, rtol=1e-4, atol=1e-5, msg=name)
        group.data_cursor = {"at": 2}
        path = group.save_checkpoint(tmp_path / "ckpt", {"reward_mean": 0.5})
        assert sorted(p.name for p in (path / "dcp").glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]

        # the shards load into one process (resharded): same counters, cursor and weights
        single = Trainer(make_model(seed=3), _cfg())
        single.load_checkpoint(tmp_path / "ckpt")
        assert (single.step_count, single.policy_version, single.data_cursor) == (2, 2, {"at": 2})
        for name, w in group.policy_state_dict().items():
            torch.testing.assert_close(single.policy_state_dict()[name], w, msg=name)

        # token ids outside the vocabulary: the ranks' embedding lookups raise
        with pytest.raises(TemperError) as err:
            group.step(make_trajectories(seed=9, groups=4, vocab=10_000))
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith("trainer rank ") and "failed: IndexError" in msg, msg
        rank = int(msg.split()[2])
        assert f"(pid {group.pids[rank]})" in msg and f"rank_{rank}.log" in msg
        assert not any(p.is_alive() for p in group.procs)  # the whole group is stopped, none left hanging
    finally:
        group.close()


def test_what_ranks_cannot_do_fails_before_any_rank_starts(tmp_path):
    with pytest.raises(ValueError, match="value head is not sharded"):
        RLConfig.model_validate({"trainer": {"world_size": 2}, "advantages": {"estimator": "gae"}})
    with pytest.raises(ValueError, match="temper sft trains in one process"):
        SFTConfig.model_validate({"trainer": {"world_size": 2}})
    n = torch.cuda.device_count() + 1  # one rank more than this machine has GPUs
    with pytest.raises(TemperError, match=f"world_size={n} on cuda: one GPU per rank"):
        TrainerGroup("unused", RLConfig(), n, tmp_path / "logs", device="cuda")
    assert not (tmp_path / "logs").exists()
