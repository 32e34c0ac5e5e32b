"""ProverTrainerSync._compute_advantage around verl's own, with an in-memory stand-in for TransferQueue."""

import asyncio

import pytest
import torch
from omegaconf import OmegaConf
from tensordict import TensorDict
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.padding_utils import construct_minimal_padding_template
from verl.trainer.ppo.v1 import get_trainer_cls, trainer_base
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

import prover_verl.trainer as prover_trainer
from prover_verl.credit_channel import CREDIT_FIELD, whole_groups


class FakeTransferQueue:
    """kv_batch_get / kv_batch_put over rows stored the way verl's TQ agent loop stores them."""

    def __init__(self, rows: dict[str, dict]):
        self.rows = rows
        self.put = {}

    def kv_batch_get(self, keys, partition_id, select_fields):
        # fields the step has not produced here (old_log_probs, values, ...) are simply absent
        return list_of_dict_to_tensordict(
            [{f: self.rows[k][f] for f in select_fields if f in self.rows[k]} for k in keys]
        )

    def kv_batch_put(self, keys, partition_id, fields: TensorDict):
        # iterating a TensorDict walks its rows, hence keys(); nested (jagged) tensors unbind per row
        columns = {name: fields[name].unbind() for name in fields.keys()}  # noqa: SIM118
        for i, key in enumerate(keys):
            self.put[key] = {name: rows[i] for name, rows in columns.items()}
        return KVBatchMeta(partition_id=partition_id, keys=keys, tags=[{}] * len(keys))


def _rows(outputs):
    rows = {}
    for i, out in enumerate(outputs):
        field = out.as_dict()
        field["uid"] = "task-0"
        rows[f"task-0_{i}_0"] = field
    return rows


def _trainer(config):
    trainer = object.__new__(get_trainer_cls("prover_sync"))
    trainer.config = config
    return trainer


async def _outputs(make_loop, server, config):
    loops = [make_loop(config, server) for _ in range(4)]
    extra = {"env": "forkroad", "task_id": "road-0", "verify": True}
    return await asyncio.gather(
        *(loop.run({}, uid="task-0", session_id=i, global_steps=1, extra_info=extra) for i, loop in enumerate(loops))
    )


def _full_config(make_config, adv_estimator):
    config = make_config(adv_estimator=adv_estimator)
    extra = {
        "algorithm": {"gamma": 1.0, "lam": 1.0, "use_kl_in_reward": False, "rollout_correction": None},
        "trainer": {"v1": {"trainer_mode": "prover_sync"}},
    }
    return OmegaConf.merge(config, extra)


@pytest.mark.parametrize("adv_estimator", ["prover", "grpo"])
async def test_compute_advantage_binds_credit_and_logs(
    monkeypatch, make_loop, make_config, scripted_server, adv_estimator
):
    config = _full_config(make_config, adv_estimator)
    outputs = await _outputs(make_loop, scripted_server(), config)
    fake = FakeTransferQueue(_rows(outputs))
    monkeypatch.setattr(trainer_base, "tq", fake)
    monkeypatch.setattr(prover_trainer, "tq", fake)
    keys = list(fake.rows)
    metrics = {}
    _trainer(config)._compute_advantage(KVBatchMeta(partition_id="train", keys=keys, tags=[{}] * 4), metrics)

    rewards = torch.tensor([o.reward_score for o in outputs])
    std = rewards.std()
    for key, out in zip(keys, outputs, strict=True):
        adv = fake.put[key]["advantages"]
        mask = torch.tensor(out.response_mask, dtype=torch.float32)
        expected = (out.reward_score - rewards.mean()) / (std + 1e-6) * mask
        if adv_estimator == "prover":
            expected += torch.tensor(out.prover_credit) / (std + 1e-6)
        torch.testing.assert_close(adv, expected, rtol=1e-5, atol=1e-5)
    credited = sum(any(o.prover_credit or []) for o in outputs)
    if adv_estimator == "prover":
        assert credited == 1
        assert metrics["prover/verified_positive_rate"] == 1.0 and metrics["prover/mean_credit"] == 0.5
    else:
        assert credited == 0 and not any(k.startswith("prover/") for k in metrics)
    assert CREDIT_FIELD in fake.rows[keys[0]]


def test_reports_verl_sync_mode_so_verl_takes_its_sync_branches():
    trainer = object.__new__(get_trainer_cls("prover_sync"))
    trainer.trainer_mode = "prover_sync"  # what verl's __init__ assigns from trainer.v1.trainer_mode
    assert trainer.trainer_mode == "sync"
    with pytest.raises(ValueError, match="not 'async'"):
        trainer.trainer_mode = "async"


def test_refilling_failed_groups_is_bounded_per_step(monkeypatch):
    # verl's sync sampler calls the refill for every failed group until the batch is full: a node whose env pool
    # cannot start failed every prompt routed to it, and the step looped for ever
    cls = get_trainer_cls("prover_sync")
    submitted = []
    monkeypatch.setattr(trainer_base.PPOTrainer, "_add_prompts_to_generate", lambda self, n: submitted.append(n))
    monkeypatch.setattr(trainer_base.PPOTrainer, "prepare_step", lambda self: {})
    trainer = object.__new__(cls)
    trainer.config = OmegaConf.create({"data": {"train_batch_size": 2}})
    trainer.global_steps = 7
    for _step in range(2):  # the count starts again at each step
        trainer.prepare_step()
        for _ in range(4 * 2):  # 4 batches of 2: allowed
            trainer._add_prompts_to_generate(1)
    with pytest.raises(RuntimeError, match=r"step 7: 9 prompts refilled for failed groups, more than 4 batches of 2"):
        for _ in range(1000):  # what verl's loop would do
            trainer._add_prompts_to_generate(1)
    assert len(submitted) == 2 * 8


async def test_padding_rows_carry_no_credit_or_counters(monkeypatch, make_loop, make_config, scripted_server):
    config = _full_config(make_config, "prover")
    outputs = await _outputs(make_loop, scripted_server(), config)
    rows = _rows(outputs)
    keys = list(rows)
    credited = next(k for k, o in zip(keys, outputs, strict=True) if any(o.prover_credit))
    # verl pads with a copy of the batch's first row; make that the credited one, as bad luck would
    order = [credited] + [k for k in keys if k != credited]
    pad, pad_tag = construct_minimal_padding_template(rows[credited], {}, eos_token_id=0)
    pad["uid"] = "pad0"
    fake = FakeTransferQueue({**{k: rows[k] for k in order}, "pad0_0_0": pad})
    monkeypatch.setattr(trainer_base, "tq", fake)
    monkeypatch.setattr(prover_trainer, "tq", fake)
    batch = KVBatchMeta(partition_id="train", keys=[*order, "pad0_0_0"], tags=[{}] * 4 + [pad_tag])
    metrics = {}
    _trainer(config)._compute_advantage(batch, metrics)

    assert pad_tag["is_padding"] and torch.all(fake.put["pad0_0_0"]["advantages"] == 0)
    reference = {}
    fake_real = FakeTransferQueue({k: rows[k] for k in order})
    monkeypatch.setattr(trainer_base, "tq", fake_real)
    monkeypatch.setattr(prover_trainer, "tq", fake_real)
    _trainer(config)._compute_advantage(KVBatchMeta(partition_id="train", keys=order, tags=[{}] * 4), reference)
    assert metrics == reference  # the copy's counters are not counted twice
    for key in order:
        torch.testing.assert_close(fake.put[key]["advantages"], fake_real.put[key]["advantages"])


async def test_credit_on_environment_tokens_is_rejected(monkeypatch, make_loop, make_config, scripted_server):
    config = _full_config(make_config, "prover")
    outputs = await _outputs(make_loop, scripted_server(), config)
    rows = _rows(outputs)
    key = next(iter(rows))
    env_token = rows[key]["response_mask"].tolist().index(0)
    rows[key][CREDIT_FIELD][env_token] = 0.5
    fake = FakeTransferQueue(rows)
    monkeypatch.setattr(trainer_base, "tq", fake)
    monkeypatch.setattr(prover_trainer, "tq", fake)
    with pytest.raises(ValueError, match="non-policy tokens"):
        _trainer(config)._compute_advantage(KVBatchMeta(partition_id="train", keys=list(rows), tags=[{}] * 4), {})


async def test_group_that_lost_a_session_keeps_plain_grpo(monkeypatch, make_loop, make_config, scripted_server):
    config = _full_config(make_config, "prover")
    outputs = await _outputs(make_loop, scripted_server(), config)
    rows = _rows(outputs)
    credited = next(k for k, o in zip(rows, outputs, strict=True) if any(o.prover_credit))
    # group task-0 keeps only the credited row and those with its outcome: uniform survivors (std 0), which the
    # estimator would reject; their credit must be dropped and counted instead. Group task-1, a whole copy,
    # keeps its credit.
    won = rows[credited]["rm_scores"].sum()
    survivors = {k: r for k, r in rows.items() if r["rm_scores"].sum() == won}
    assert 1 <= len(survivors) < len(rows)
    whole = {k.replace("task-0", "task-1"): {**r, "uid": "task-1"} for k, r in rows.items()}
    fake = FakeTransferQueue({**survivors, **whole})
    monkeypatch.setattr(trainer_base, "tq", fake)
    monkeypatch.setattr(prover_trainer, "tq", fake)
    metrics = {}
    keys = list(fake.rows)
    _trainer(config)._compute_advantage(KVBatchMeta(partition_id="train", keys=keys, tags=[{}] * len(keys)), metrics)

    assert metrics["prover/credit_dropped_partial_group"] == 1.0
    # the share of policy tokens credited counts the whole group's credit only (the survivors' was dropped)
    policy = sum(float(r["response_mask"].sum()) for r in fake.rows.values())
    kept = sum(int((torch.as_tensor(r[CREDIT_FIELD]) > 0).sum()) for k, r in fake.rows.items() if k in whole)
    assert kept > 0 and metrics["prover/credited_token_frac"] == pytest.approx(kept / policy)
    for key in survivors:  # uniform survivors: plain GRPO gives them zero advantage
        assert torch.all(fake.put[key]["advantages"] == 0)
    rewards = torch.tensor([o.reward_score for o in outputs])
    std = rewards.std()
    for key, out in zip(rows, outputs, strict=True):  # the whole group: GRPO plus its credit, as without the other
        mask = torch.tensor(out.response_mask, dtype=torch.float32)
        expected = ((out.reward_score - rewards.mean()) * mask + torch.tensor(out.prover_credit)) / (std + 1e-6)
        torch.testing.assert_close(fake.put[key.replace("task-0", "task-1")]["advantages"], expected)


def test_whole_groups():
    real = torch.tensor([True, True, True, True, False])
    assert whole_groups(["a", "a", "b", "c", "a"], real, 2).tolist() == [True, True, False, False, False]
    assert whole_groups(["a", "a", "a"], torch.tensor([True] * 3), 2).tolist() == [False] * 3


async def test_gigpo_turn_record_travels_from_the_agent_loop_to_the_estimator(
    monkeypatch, make_loop, make_config, scripted_server
):
    # sessions alternate right (wins in 3 turns) / left (loses in 3 turns); all four start at the fork, the two
    # right-goers share every later state, as do the two left-goers
    config = _full_config(make_config, "gigpo")
    outputs = await _outputs(make_loop, scripted_server(), config)
    rows = _rows(outputs)
    keys = list(rows)
    pad, pad_tag = construct_minimal_padding_template(rows[keys[0]], {}, eos_token_id=0)
    assert pad["uid"] == "task-0"  # verl's padding copies the first row, uid and turn record included
    fake = FakeTransferQueue({**rows, "pad0": pad})
    monkeypatch.setattr(trainer_base, "tq", fake)
    monkeypatch.setattr(prover_trainer, "tq", fake)
    batch = KVBatchMeta(partition_id="train", keys=[*keys, "pad0"], tags=[{}] * 4 + [pad_tag])
    _trainer(config)._compute_advantage(batch, {})

    # episode level, as verl's GRPO counts the padding row (score 0) in its group: (1, 0, 1, 0, 0), mean 0.4, std
    # sqrt(0.3) -> wins +1.0954, losses -0.7303. Step level, the padding's turns dropped: the fork is an anchor of
    # 4 with returns 0.95^2 R -> +-0.8660; turns 1 and 2 are anchors of equal returns -> 0.
    won = [o.reward_score for o in outputs]
    assert sorted(won) == [0.0, 0.0, 1.0, 1.0]  # which session goes right depends on the order the server is asked
    for key, out in zip(keys, outputs, strict=True):
        episode, step = (1.095445, 0.866025) if out.reward_score else (-0.730297, -0.866025)
        turns = rows[key]["gigpo_turns_left"]
        expected = (episode + step * (turns == 3)) * (turns > 0)
        torch.testing.assert_close(fake.put[key]["advantages"], expected.float(), rtol=1e-4, atol=1e-4)
        assert torch.equal(turns > 0, torch.tensor(out.response_mask).bool())
        assert sorted(set(turns.tolist())) == [0, 1, 2, 3]


def test_content_order_does_not_depend_on_arrival_or_uids(monkeypatch):
    """Rows reach the trainer in the order their episodes finished, under random uids: the order the update sees
    under full_determinism is the order of their tokens."""
    seqs = [[5, 1, 2], [3, 4], [5, 1], [3, 4, 9]]
    seen = []
    for arrival, uid in (([0, 1, 2, 3], "f3a1"), ([2, 3, 0, 1], "07bc")):
        rows = {f"{uid}{i}_{i}_0": {"input_ids": torch.tensor(seqs[i]), CREDIT_FIELD: torch.zeros(1)} for i in arrival}
        monkeypatch.setattr(prover_trainer, "tq", FakeTransferQueue(rows))
        batch = KVBatchMeta(partition_id="train", keys=list(rows), tags=[{"i": i} for i in arrival])
        batch.reorder(prover_trainer.content_order(batch))
        seen.append([rows[k]["input_ids"].tolist() for k in batch.keys])
        assert [rows[k]["input_ids"].tolist() for k in batch.keys] == [seqs[t["i"]] for t in batch.tags]
    assert seen[0] == seen[1] == [[3, 4], [3, 4, 9], [5, 1], [5, 1, 2]]


def test_content_order_breaks_a_tie_of_tokens_by_credit(monkeypatch):
    """Two episodes of a group that played the same tokens, only one of them credited by ProVer, are not
    interchangeable: the credited one must take the same place whichever finished first."""
    tokens, credited = torch.tensor([3, 4, 5]), torch.tensor([0.0, 1.2])
    placed = []
    for arrival in ([0, 1], [1, 0]):
        rows = {f"k{i}": {"input_ids": tokens, CREDIT_FIELD: credited * i} for i in arrival}
        monkeypatch.setattr(prover_trainer, "tq", FakeTransferQueue(rows))
        batch = KVBatchMeta(partition_id="train", keys=list(rows), tags=[{}] * 2)
        batch.reorder(prover_trainer.content_order(batch))
        placed.append(batch.keys)
    assert placed == [["k0", "k1"], ["k0", "k1"]]
