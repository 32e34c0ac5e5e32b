"""KeyDoor's credit-assignment knobs (issue 39): distractor rooms before the key room and a guard room (a second
necessary decision), in the family, the batch core, the text view and the features."""

import pytest

from envs.keydoor import env as kd

GUARD = {"doors": 2, "note_at_keys": True, "early_pivot": True, "guard": True}
DISTRACT = {"doors": 2, "note_at_keys": True, "distractors": 7}


def test_distractors_place_the_key_room_and_draw_like_early_pivot():
    tasks = kd.task_family("eval", 32, distractors=7, note_at_keys=True, doors=2)
    assert {(t.num_turns, t.pivot_turn, t.note_turn) for t in tasks} == {(kd.MAX_TURNS, 7, 7)}
    assert all(t.carpets[:7] == tuple(c for c in t.carpets[:7] if c != kd.NONE) for t in tasks)  # 7 carpeted rooms
    early = kd.task_family("eval", 8, early_pivot=True, note_at_keys=True, doors=2)
    assert kd.task_family("eval", 8, distractors=1, note_at_keys=True, doors=2) == early
    with pytest.raises(ValueError, match="distractors"):
        kd.task_family("eval", 4, distractors=9)
    with pytest.raises(ValueError, match="distractors"):
        kd.task_family("eval", 4, distractors=8, guard=True)
    with pytest.raises(ValueError, match="set one"):
        kd.task_family("eval", 4, distractors=2, early_pivot=True)


def test_guard_is_drawn_last_and_leaves_the_other_draws_and_the_repr_alone():
    plain = kd.task_family("train", 16, doors=2, note_at_keys=True, early_pivot=True)
    guarded = kd.task_family("train", 16, **GUARD)
    for a, b in zip(plain, guarded, strict=True):
        assert (a.num_turns, a.note_turn, a.pivot_turn, a.door) == (b.num_turns, b.note_turn, b.pivot_turn, b.door)
        assert b.pivot_turn < b.guard_turn <= b.num_turns - 2 and b.carpets[b.guard_turn] == kd.NONE
        assert a.guard_turn == kd.NONE and "guard" not in repr(a)
    assert kd.KeyDoorEnv(**GUARD).data_fingerprint() != kd.KeyDoorEnv(doors=2, note_at_keys=True,
                                                                      early_pivot=True).data_fingerprint()  # fmt: skip
    with pytest.raises(ValueError, match="guard_turn"):
        kd.KeyDoorTask("x", 6, 0, 2, 0, (0,) * 6, guard_turn=2)


def test_a_key_held_past_the_guard_is_lost_and_a_pocketed_one_comes_back():
    env = kd.KeyDoorEnv(split="eval", **GUARD)
    for task_id in env.task_ids()[:16]:
        env.reset(options={"task_id": task_id})
        expert = env.expert_actions()
        assert expert[env.task.guard_turn] == "drop key"
        for action in expert:
            obs, reward, *_ = env.step(action)
        assert reward == 1.0, obs
        # the key room's decision alone no longer wins: walking on past the guard loses the key
        env.reset(options={"task_id": task_id})
        naive = ["walk on"] * env.task.num_turns
        naive[env.task.pivot_turn] = expert[env.task.pivot_turn]
        trace = [env.step(a) for a in naive]
        assert trace[-1][1] == 0.0
        assert trace[env.task.guard_turn][0].startswith(f"[room {env.task.guard_turn + 2}/")
        assert "The guard takes the key from your hands." in trace[env.task.guard_turn][0]
        assert "Your hands are empty." in trace[env.task.guard_turn][0]
