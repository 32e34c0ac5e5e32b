"""``prover_verl.data``: one dataset row per task, the spec's default splits, verify flags, limits, empty splits."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import envs
from envs.toy import ToyEnv
from prover_verl import data
from prover_verl.agent import AGENT_NAME


class SplitToy(ToyEnv):
    """The toy keypad env with splits: 5 train tasks, 2 val tasks (other codes), none in ``empty``."""

    name = "splittoy"

    def __init__(self, split: str = "train"):
        super().__init__(num_tasks=7)
        self.split = split
        self._ids = {"train": ["code-0", "code-1", "code-2", "code-3", "code-4"], "val": ["code-5", "code-6"]}

    def task_ids(self):
        return list(self._ids.get(self.split, []))

    def task_category(self, task_id):
        return "even" if int(task_id.split("-")[1]) % 2 == 0 else "odd"


envs.register_env("splittoy", SplitToy, train_split="train", val_split="val")


def test_task_rows_one_row_per_task_in_the_verl_row_format():
    rows = data.task_rows("splittoy", "val", False, {})
    assert [r["extra_info"]["task_id"] for r in rows] == ["code-5", "code-6"]
    first = rows[0]
    assert first["data_source"] == "splittoy/odd" and first["agent_name"] == AGENT_NAME
    assert first["prompt"] == [{"role": "user", "content": "splittoy task code-5"}]
    assert first["reward_model"] == {"style": "env", "ground_truth": ""}
    assert first["extra_info"] == {
        "env": "splittoy", "task_id": "code-5", "category": "odd", "split": "val", "verify": False, "index": 0,
    }  # fmt: skip
    assert [r["extra_info"]["index"] for r in rows] == [0, 1] and rows[1]["extra_info"]["category"] == "even"
    assert [r["extra_info"]["task_id"] for r in data.task_rows("splittoy", "train", True, {}, limit=2)] == [
        "code-0",
        "code-1",
    ]


def test_an_empty_split_is_an_error_naming_env_and_split():
    with pytest.raises(ValueError, match="environment 'splittoy' has no tasks in split 'empty'"):
        data.task_rows("splittoy", "empty", True, {})


def test_main_writes_train_rows_verified_and_val_rows_not_from_the_spec_splits(tmp_path, capsys):
    data.main(["--env", "splittoy", "--out", str(tmp_path), "--max-train", "3"])
    train, val = (pd.read_parquet(tmp_path / f"{name}.parquet") for name in ("train", "val"))
    assert [e["task_id"] for e in train["extra_info"]] == ["code-0", "code-1", "code-2"]  # --max-train
    assert all(e["verify"] and e["split"] == "train" for e in train["extra_info"])
    assert [e["task_id"] for e in val["extra_info"]] == ["code-5", "code-6"]
    assert not any(e["verify"] for e in val["extra_info"]) and {e["split"] for e in val["extra_info"]} == {"val"}
    assert "splittoy: 3 train tasks" in capsys.readouterr().out
    data.main(["--env", "splittoy", "--out", str(tmp_path / "swapped"), "--train-split", "val", "--max-val", "1"])
    swapped = pd.read_parquet(tmp_path / "swapped" / "train.parquet")
    assert [e["task_id"] for e in swapped["extra_info"]] == ["code-5", "code-6"]
    assert len(pd.read_parquet(tmp_path / "swapped" / "val.parquet")) == 1
    with pytest.raises(ValueError, match="no tasks in split 'empty'"):
        data.main(["--env", "splittoy", "--out", str(tmp_path / "e"), "--val-split", "empty"])
    with pytest.raises(SystemExit):
        data.main(["--env", "nosuchenv", "--out", str(tmp_path)])


def test_alfworld_defaults_are_its_spec_splits(tmp_path, monkeypatch):
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    paths = data.write_dataset("alfworld", tmp_path, envs.spec("alfworld").train_split, envs.spec("alfworld").val_split)
    train, val = (pd.read_parquet(paths[name]) for name in ("train", "val"))
    assert (len(train), len(val)) == (12, 6)  # the shipped games
    assert {e["split"] for e in val["extra_info"]} == {"valid_unseen"}
    assert set(train["data_source"]) == {f"alfworld/{t}" for t in envs.spec("alfworld").table.category_names}


def test_a_protocol_sets_the_splits_alfworld_validates_in_and_out_of_distribution(tmp_path, monkeypatch):
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    root = tmp_path / "alfworld"
    shipped = Path(envs.make("alfworld").data_dir) / "json_2.1.1"
    for split, source in [("train", "train"), ("valid_seen", "train"), ("valid_unseen", "valid_unseen")]:
        first = sorted((shipped / source).iterdir())[0]
        shutil.copytree(first, root / "json_2.1.1" / split / first.name)
    kwargs = json.dumps({"data_dir": str(root)})
    data.main(["--env", "alfworld", "--out", str(tmp_path / "d"), "--protocol", "verl_agent", "--env-kwargs", kwargs])
    val = pd.read_parquet(tmp_path / "d" / "val.parquet")
    assert [e["split"] for e in val["extra_info"]] == ["valid_seen", "valid_unseen"]  # verl-agent's ID and OOD
    assert not any(e["verify"] for e in val["extra_info"])
    # the protocol named in the env kwargs (as the recipes' data commands pass it) sets the splits too
    data.main(["--env", "alfworld", "--out", str(tmp_path / "e"), "--env-kwargs", json.dumps({**json.loads(kwargs),
               "protocol": "verl_agent"})])  # fmt: skip
    val = pd.read_parquet(tmp_path / "e" / "val.parquet")
    assert [e["split"] for e in val["extra_info"]] == ["valid_seen", "valid_unseen"]
    with pytest.raises(ValueError, match="unknown alfworld protocol 'search_r1'; known: default, verl_agent"):
        data.main(["--env", "alfworld", "--out", str(tmp_path / "x"), "--protocol", "search_r1"])
    with pytest.raises(ValueError, match="env 'keydoor' has no protocols"):
        data.main(["--env", "keydoor", "--out", str(tmp_path / "x"), "--protocol", "verl_agent"])
    with pytest.raises(SystemExit):  # two protocols named
        data.main(["--env", "alfworld", "--out", str(tmp_path / "x"), "--protocol", "verl_agent",
                   "--env-kwargs", '{"protocol": "default"}'])  # fmt: skip


def test_protocol_splits_of_every_env_family():
    # one resolution path: Search-QA's presets (which set no splits) give the spec's; before, this raised
    assert data.protocol_splits("searchqa", "search_r1") == ("train", ("test",))
    assert data.protocol_splits("alfworld", "verl_agent") == ("train", ("valid_seen", "valid_unseen"))
    assert data.protocol_splits("alfworld", None) == ("train", ("valid_unseen",))
    assert data.protocol_splits("webshop", "original") == ("train", ("test",))
    assert data.protocol_splits("keydoor", None) == ("train", ("eval",))


@pytest.mark.slow
def test_webshop_verl_agent_protocol_trains_on_goals_from_500(tmp_path):
    data.main(["--env", "webshop", "--out", str(tmp_path), "--protocol", "verl_agent", "--max-val", "3"])
    train, val = (pd.read_parquet(tmp_path / f"{name}.parquet") for name in ("train", "val"))
    assert train["extra_info"][0]["task_id"] == "500" and len(train) > 500  # synthetic goals of the shipped files
    assert [e["task_id"] for e in val["extra_info"]] == ["0", "1", "2"]
