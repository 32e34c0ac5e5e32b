"""``benchmarks/keydoor_reading.py``: what a size of the tiny model family reads of KeyDoor's note."""

import json

import pytest

from benchmarks import keydoor_reading


def test_reading_weights_each_note_colour_by_its_held_out_tasks():
    p_take = {"red": {"red": 0.9, "blue": 0.1}, "blue": {"red": 0.3, "blue": 0.6}}
    note, other = keydoor_reading.reading(p_take, {"red": 1, "blue": 3})
    assert note == pytest.approx((0.9 + 3 * 0.6) / 4) and other == pytest.approx((0.1 + 3 * 0.3) / 4)


def test_imitated_episodes_end_at_the_key_taken_by_the_note():
    episodes = keydoor_reading.first_replies(keydoor_reading.HARD, 6)
    assert len(episodes) == 6
    for messages in episodes:
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant"]
        colour = messages[3]["content"].split("opens with the ")[1].split(" key")[0]
        assert messages[4]["content"] == f"<action>take {colour} key</action>"


def test_each_size_is_trained_probed_and_timed_into_the_results_file(tmp_path):
    out = tmp_path / "out"
    argv = ["--sizes", "2x64,1x32", "--tasks", "4", "--batch", "2", "--steps", "3", "--every", "2"]
    report = keydoor_reading.main([*argv, "--out", str(out), "--work", str(tmp_path / "work")])
    saved = json.loads((out / "results.json").read_text())
    assert saved == json.loads(json.dumps(report))
    assert "<path>" in saved["command"] and str(tmp_path) not in saved["command"]
    first, second = saved["sizes"]
    assert (first["size"], first["params"]) == ("2x64", 106_880)  # the learning benchmark's tiny model
    assert second["params"] < first["params"] and [p["step"] for p in second["curve"]] == [0, 2, 3]
    assert all(0 <= p["p_note"] <= 1 and 0 <= p["p_other"] <= 1 for p in first["curve"])
    table = keydoor_reading.render(saved)
    assert "| 2x64 | 0.003 | 106,880 | 3 |" in table and "(×1.0) |" in table


@pytest.mark.parametrize("bad", [["--sizes", "2-64"], ["--sizes", "2x64x3"], ["--steps", "0"]])
def test_bad_settings_are_errors_naming_the_flag(bad, capsys):
    with pytest.raises(SystemExit):
        keydoor_reading.parse_args(bad)
    assert bad[0] in capsys.readouterr().err
