"""``benchmarks/keydoor_probe.py`` asks for each key right after the key room's observation, per note colour."""

import pytest

from benchmarks import keydoor_probe


def test_probe_asks_each_key_after_the_key_rooms_observation(monkeypatch, tmp_path):
    asked = []

    def fake_probability(model, builder, messages):
        asked.append(messages)
        note_red = "opens with the red key" in messages[-2]["content"]
        took_red = messages[-1]["content"] == "<action>take red key</action>"
        return 0.9 if note_red == took_red else 0.1  # a policy that reads the note

    monkeypatch.setattr(keydoor_probe, "reply_probability", fake_probability)
    monkeypatch.setattr(keydoor_probe, "load_policy_model", lambda path: type("M", (), {"eval": lambda self: self})())
    monkeypatch.setattr(keydoor_probe, "token_builder", lambda path: None)
    monkeypatch.setattr(keydoor_probe, "expert_conversation", _conversation)
    result = keydoor_probe.probe(tmp_path, None, keydoor_probe.HARD)
    assert sum(result["tasks"].values()) == 64 and set(result["tasks"]) == {"red", "blue"}
    p = result["p_take"]
    assert p == {"red": pytest.approx({"red": 0.9, "blue": 0.1}), "blue": pytest.approx({"red": 0.1, "blue": 0.9})}
    assert all("Keys hang on the wall" in m[-2]["content"] and m[-2]["role"] == "user" for m in asked)
    assert len(asked) == 128 and all(len(m) == 5 for m in asked)  # system, room 1, its reply, the key room, the ask


def _conversation(env_name, env_kwargs, task_id, split):
    from prover_verl.imitate import expert_conversation

    return expert_conversation(env_name, env_kwargs, task_id, split)
