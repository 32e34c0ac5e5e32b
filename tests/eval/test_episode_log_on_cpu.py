"""The validation-episode log: one file per process and node, read back whole by the tables."""

import json

from prover_verl.eval import episode_log
from prover_verl.eval.tables import load_episodes


def _log(log_dir, task_id):
    extra = {"task_id": task_id, "category": "c", "split": "test"}
    episode_log.log_episode(
        str(log_dir), step=3, env="keydoor", extra=extra, outcome={"won": 1.0}, reward=1.0, turns=2, stop="terminated"
    )


def test_two_nodes_whose_workers_share_a_pid_write_apart_on_shared_storage(tmp_path, monkeypatch):
    # before, both appended to episodes-<pid>.jsonl: on shared storage one file for two writers (torn lines)
    monkeypatch.setattr(episode_log.os, "getpid", lambda: 4242)
    for host, task in (("node-a", "t0"), ("node b/1", "t1"), ("node-a", "t2")):
        monkeypatch.setattr(episode_log.socket, "gethostname", lambda host=host: host)
        _log(tmp_path, task)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["episodes-node-a-4242.jsonl", "episodes-node_b_1-4242.jsonl"]
    lines = (tmp_path / "episodes-node-a-4242.jsonl").read_text().splitlines()
    assert [json.loads(line)["task_id"] for line in lines] == ["t0", "t2"]
    assert sorted(ep["task_id"] for ep in load_episodes(tmp_path)) == ["t0", "t1", "t2"]
