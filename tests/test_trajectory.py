import pytest

from temper.trajectory import FailureKind, Trajectory


def make(**kw) -> Trajectory:
    base = dict(token_ids=[1, 2, 3, 4, 5], loss_mask=[0, 0, 1, 0, 1], logprobs=[0, 0, -0.5, 0, -1.0],
                versions=[-1, -1, 3, -1, 4])
    return Trajectory(**{**base, **kw})


def test_derived_fields():
    t = make()
    assert (t.prompt_len, t.num_model_tokens, t.min_version(), t.trainable) == (2, 2, 3, True)


def test_infrastructure_failure_is_not_trainable_and_round_trips():
    t = make(failure="sandbox_crash", reward=0.0)
    assert t.failure is FailureKind.SANDBOX_CRASH and not t.trainable
    again = Trajectory.from_dict(t.to_dict())
    assert again == t and again.to_dict()["failure"] == "sandbox_crash"


def test_lengths_must_agree():
    with pytest.raises(ValueError, match="must have equal length"):
        make(logprobs=[0.0])
