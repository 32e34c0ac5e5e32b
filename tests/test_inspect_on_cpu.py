"""The group-log report: its counts are the trainer's metrics, each group shows its pair, segment, runs and credit."""

import json
import re
from html.parser import HTMLParser

import pytest
import torch

from prover_verl import inspect
from prover_verl.eval import group_log
from prover_verl.eval.group_log import read_groups
from prover_verl.metrics import FIELD_PREFIX, STAT_KEYS, summarize


class Elements(HTMLParser):
    """The page's elements in document order: ``(tag, attributes, text inside)``, and the enclosing ones' indices."""

    def __init__(self, page: str):
        super().__init__()
        self.elements: list[tuple[str, dict, list[str]]] = []
        self.parents: list[list[int]] = []
        self._open: list[int] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs), []))
        self.parents.append(list(self._open))
        if tag not in ("input", "meta", "br", "line", "circle", "polyline", "rect"):
            self._open.append(len(self.elements) - 1)

    def handle_endtag(self, tag):
        while self._open and self.elements[self._open.pop()][0] != tag:
            pass

    def handle_data(self, data):
        for i in self._open:
            self.elements[i][2].append(data)

    def find(self, tag=None, inside=None, **attrs):
        """Elements with ``tag`` and these attribute values (``class_`` for class), optionally inside element
        ``inside`` (``data_x`` for ``data-x``); yields ``(index, attributes, text)``."""
        attrs = {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()}
        for i, (t, a, text) in enumerate(self.elements):
            matches = (tag is None or t == tag) and all(a.get(k) == v for k, v in attrs.items())
            if matches and (inside is None or inside in self.parents[i]):
                yield i, a, "".join(text)


def judge_answers(server, answer):
    """Make ``server`` answer every judge prompt with ``answer`` (None: its own correct answer)."""
    if answer is not None:
        reply = server._reply
        server._reply = lambda text, key: answer if "You analyse two attempts" in text else reply(text, key)
    return server


# step -> groups: (uid, the judge's answer, a server whose policy always goes right, i.e. no pair)
PLAN = {
    1: [("uniform", None, True), ("pos", None, False)],
    2: [("garbled", "I think turn 0?", False), ("far", '{"trajectory": "A", "start_turn": 9, "end_turn": 9}', False)],
    3: [("pos2", None, False)],
}
OUTCOMES = {"pos": "verified_positive", "uniform": "no_pair", "garbled": "malformed", "far": "out_of_range"}
OUTCOMES["pos2"] = "verified_positive"


@pytest.fixture
async def run(play_group, make_config, scripted_server, tmp_path):
    """Three logged steps of the agent loop on the pivot road; their ``prover/*`` metrics as the trainer logs them."""
    config = make_config(k=4, log_dir=str(tmp_path / "log"))
    metrics = {}
    for step, groups in PLAN.items():
        outputs = []
        for uid, answer, uniform in groups:
            server = judge_answers(scripted_server(always_right=uniform), answer)
            outputs += await play_group(config, server, uid, env="pivotroad", global_steps=step)
        fields = {FIELD_PREFIX + k: torch.tensor([o.prover_stats[k] for o in outputs]) for k in STAT_KEYS}
        metrics[step] = summarize(fields)
    return tmp_path / "log", metrics


def test_the_reports_counts_are_the_trainers_metrics_of_each_step(run, tmp_path):
    log_dir, metrics = run
    assert inspect.main([str(log_dir), "--out", str(tmp_path / "report.html")]) == 0
    page = Elements((tmp_path / "report.html").read_text())
    table = {}
    for step in metrics:
        ((row, _, _),) = page.find("tr", data_step=str(step))
        table[step] = {
            a["data-metric"]: float(a["data-value"]) for _, a, _ in page.find("td", inside=row) if "data-value" in a
        }
    assert metrics[2]["prover/judge_malformed"] == 1 and metrics[2]["prover/judge_out_of_range"] == 1
    for step, expected in metrics.items():
        for metric in inspect.COLUMNS:
            assert table[step][metric] == pytest.approx(expected[metric]), (step, metric)
    # the pivot road names turn 0, the fork, which the judge proposes: its usable proposals (steps 1, 3) all hit
    assert {s: t.get("judge_hit_rate") for s, t in table.items()} == {1: 1.0, 2: None, 3: 1.0}
    assert table[2]["credited_token_share"] == 0 and 0 < table[1]["credited_token_share"] < 1


def test_a_log_missing_groups_the_trainer_counted_says_so_in_the_page_and_exit_status(run, tmp_path, capsys):
    # nodes logging to local disks leave only some groups-*.jsonl here: before, the report recomputed its counts
    # from whatever it saw, silently
    log_dir, metrics = run
    logger = tmp_path / "metrics.jsonl"  # verl's file logger: {"step", "data"} per line
    logger.write_text("".join(json.dumps({"step": s, "data": m}) + "\n" for s, m in metrics.items()))
    report = tmp_path / "report.html"
    assert inspect.main([str(log_dir), "--out", str(report), "--metrics", str(logger)]) == 0
    assert "INCOMPLETE" not in report.read_text()
    (path,) = log_dir.glob("groups-*.jsonl")  # one process logged all: drop the group a lost file held
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if '"uid": "far"' not in line))
    assert len(path.read_text().splitlines()) == len(lines) - 1
    assert inspect.main([str(log_dir), "--out", str(report), "--metrics", str(logger)]) == 1
    assert "INCOMPLETE: step 2: the log holds 1 of the trainer&#x27;s 2 groups" in report.read_text()
    assert "INCOMPLETE: step 2: the log holds 1 of the trainer's 2 groups" in capsys.readouterr().err


def test_each_group_shows_its_outcome_pair_segment_runs_and_credit(run, tmp_path):
    log_dir, _ = run
    records, _ = read_groups(log_dir)
    page = Elements(inspect.build_report(records, str(log_dir)))
    groups = {a["data-uid"]: (i, a["data-outcome"]) for i, a, _ in page.find("article")}
    assert {uid: outcome for uid, (_, outcome) in groups.items()} == OUTCOMES
    filters = {a["class"]: " ".join(text.split()) for _, a, text in page.find("label")}
    assert filters == {
        "o-verified_positive": "verified positive 2",
        "o-no_pair": "no pair 1",
        "o-malformed": "malformed 1",
        "o-out_of_range": "out of range 1",
    }
    assert {a["data-outcome"] for _, a, _ in page.find("input")} == set(OUTCOMES.values())

    article, _ = groups["pos"]
    (record,) = [r for r in records if r["uid"] == "pos"]
    success, failure = record["judge"]["shown"]
    # the pair side by side: the success with its proposed, credited and pivotal turn 0; the failure unmarked
    ((column, _, heading),) = page.find("div", inside=article, class_="traj", data_traj=str(success))
    assert "won" in heading
    assert [a["data-turn"] for _, a, _ in page.find("tr", inside=column, class_="seg credited")] == ["0"]
    (pivot,) = page.find("span", inside=column, class_="pivot")
    ((other, _, _),) = page.find("div", inside=article, class_="traj", data_traj=str(failure))
    assert not list(page.find("tr", inside=other, class_="seg credited"))
    # the K=4 runs from each fork point, the estimate and the credit
    ((cell, a, text),) = page.find("td", inside=article, class_="estimate")
    assert float(a["data-estimate"]) == 0.5 and "0.250" in text  # +0.500 +- sqrt(.5 * .5 / 4)
    assert len(list(page.find("i", inside=article, class_="win"))) == 2 + 4
    ((_, _, credit),) = page.find("td", inside=article, class_="credit")
    assert credit.startswith("+0.500 on tokens")
    ((_, _, answer),) = page.find("pre", inside=article)
    assert '"reason": "the fork"' in answer  # the judge's raw answer, and its reason in words
    assert [t for _, _, t in page.find("q", inside=article)] == ["the fork"]

    article, _ = groups["garbled"]
    assert [t for _, _, t in page.find("pre", inside=article)] == ["I think turn 0?"]
    assert not list(page.find("table", inside=article, class_="segments"))


def test_a_steps_credited_groups_come_first(run):
    log_dir, _ = run
    records, _ = read_groups(log_dir)
    page = Elements(inspect.build_report(records, str(log_dir)))
    # step 1 played "uniform" before "pos"; the page shows the credited group first
    assert [a["data-uid"] for _, a, _ in page.find("article")] == ["pos", "uniform", "garbled", "far", "pos2"]
    assert sorted(inspect.SHOW_FIRST) == sorted(group_log.OUTCOMES)


def test_the_page_is_self_contained(run, tmp_path):
    log_dir, _ = run
    page = inspect.build_report(read_groups(log_dir)[0], str(log_dir))
    assert not re.search(r"https?://|<link|<img|src=", page)
    assert not re.search(r'href="(?!#)', page)


def test_steps_limit_the_details_not_the_counts(run):
    log_dir, _ = run
    records, _ = read_groups(log_dir)
    page = Elements(inspect.build_report(records, str(log_dir), steps=inspect.parse_steps("2-3")))
    assert {a["data-uid"] for _, a, _ in page.find("article")} == {"garbled", "far", "pos2"}
    assert len(list(page.find("tr", data_step="1"))) == 1
    assert inspect.parse_steps("1-3,7") == {1, 2, 3, 7}
    with pytest.raises(ValueError, match="--steps"):
        inspect.parse_steps("one")


def test_an_empty_log_dir_is_an_error_that_says_what_to_set(tmp_path, capsys):
    with pytest.raises(SystemExit):
        inspect.main([str(tmp_path)])
    assert "algorithm.prover.log_dir" in capsys.readouterr().err
