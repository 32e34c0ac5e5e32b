"""The group log: one JSON line per rollout group ProVer looked at (``algorithm.prover.log_dir``), for
``python -m prover_verl.inspect`` (:mod:`prover_verl.inspect`).

A line holds what the judge was shown and answered, each verified segment with the K outcomes from both fork points,
the credit, the group's counters, and the observations and actions of the pair shown (or of the proposed trajectory),
each cut to ``log_max_chars``. :func:`group_record` builds it (pure); :func:`write_group` appends it to this process's
file, ``groups-<host>-<pid>-<part>.jsonl``, starting the next part once a file would pass ``log_file_mb`` (parts are
never deleted: a report needs every group of a step). Groups whose sessions failed before the judge
(``prover/session_failed``) are not logged: they have no episodes to show.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from prover_verl.agent.episode import Episode
from prover_verl.core import FixedCredit, SegmentCredit
from prover_verl.judge.base import JudgeStatus
from prover_verl.metrics import ProverStats

logger = logging.getLogger(__name__)

FORMAT = 1
PIVOT_KEY = "pivot_turn"  # an env that knows a task's pivotal turn puts it in its info under this key
PATTERN = "groups-*.jsonl"

# judge statuses that leave a group without a proposal although it has a pair
JUDGE_FAILURES = tuple(s.value for s in JudgeStatus if s not in (JudgeStatus.OK, JudgeStatus.NO_PAIR))
# A group's outcome, as the report filters it: where ProVer stopped with it (or what its verification found).
OUTCOMES = (
    "no_pair",
    "skipped_budget",
    *JUDGE_FAILURES,
    "verify_timeout",
    "verify_failed",
    "verified_positive",
    "verified_not_positive",
    "credited_unverified",  # ablation=judge_only
)


def group_outcome(stats: ProverStats) -> str:
    """The outcome of one group step from its counters (one of :data:`OUTCOMES`)."""
    if stats.judge_no_pair:
        return "no_pair"
    if stats.skipped_budget:
        return "skipped_budget"
    for status in JUDGE_FAILURES:
        if getattr(stats, f"judge_{status}"):
            return status
    if stats.verify_timeout:
        return "verify_timeout"
    if stats.verify_failed:
        return "verify_failed"
    if stats.positive:
        return "verified_positive" if stats.verified else "credited_unverified"
    return "verified_not_positive"


def group_record(step: Any, episodes: Mapping[int, Episode], *, global_step: int, uid: Any, max_chars: int) -> dict:
    """The log line of one group step.

    Args:
        step: The :class:`~prover_verl.verify.group_step.GroupStep` of the group.
        episodes: The group's episodes by ``traj_id`` (the session id).
        global_step: The training step whose rollout this is.
        uid: The group's id.
        max_chars: Each observation and action is cut to this many characters.
    """
    stats = dataclasses.replace(
        step.stats,  # the rows' own rollout cost, as the trainer's metrics sum it over the group's rows
        env_steps=sum(e.result.env_steps for e in episodes.values()),
        gen_tokens=sum(e.result.gen_tokens for e in episodes.values()),
    )
    judgement = step.judgement
    shown = list(judgement.shown) if judgement is not None else []
    if not shown and judgement is not None and judgement.proposal is not None:
        shown = [judgement.proposal.traj_id]  # a judge that does not say what it saw: at least the proposed one
    return {
        "format": FORMAT,
        "step": int(global_step),
        "uid": str(uid),
        "time": time.time(),
        "task": next(iter(episodes.values())).task if episodes else "",
        "outcome": group_outcome(stats),
        "stats": stats.as_dict(),
        "trajectories": [_trajectory(i, episodes[i]) for i in sorted(episodes)],
        "judge": None if judgement is None else _judge(judgement, step.rejected, max_chars),
        "segments": [_segment(s) for s in step.verified],
        "credits": [_credit(c, episodes[c.row]) for c in step.credits],
        "text": {str(i): _text(episodes[i], max_chars) for i in shown if i in episodes},
    }


def _trajectory(traj_id: int, episode: Episode) -> dict:
    result = episode.result
    return {
        "id": traj_id,
        "success": result.won,
        "reward": result.reward,
        "turns": episode.num_turns,
        "stop": result.stop,
        "policy_tokens": sum(episode.conversation.response_mask),
        PIVOT_KEY: pivot_turn(episode),
    }


def pivot_turn(episode: Episode) -> int | None:
    """The pivotal turn the env names in any info of the episode (``info["pivot_turn"]``), or None."""
    infos = [mark.info for mark in episode.result.marks] + [episode.result.final_info or {}]
    for info in infos:
        value = info.get(PIVOT_KEY)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _judge(judgement: Any, rejected: str | None, max_chars: int) -> dict:
    proposal = judgement.proposal
    return {
        "shown": list(judgement.shown),
        "labels": dict(judgement.labels),
        "answer": judgement.answer,
        "status": JudgeStatus(judgement.status).value,
        "proposal": None if proposal is None else dataclasses.asdict(proposal),
        "rejected": rejected,
        "tokens": judgement.tokens,
        # the agentic judge's reading, in order; a tool result holds up to ten turns, so it gets ten turns' room
        "tool_calls": [
            {**call, "arguments": cut(call["arguments"], max_chars), "result": cut(call["result"], 10 * max_chars)}
            for call in judgement.tool_calls
        ],
    }


def _segment(segment: Any) -> dict:
    v = segment.verification
    after_turn = segment.end_turn + 1
    return {
        "turns": [segment.start_turn, segment.end_turn],
        "before": _fork(segment.start_turn, v.before, v.before_runs),
        "after": {**_fork(after_turn, v.after, v.after_runs), "terminal": not v.after_runs},
        "estimate": v.estimate,
        "stderr": v.stderr,
        "failed": v.failed,
        "env_steps": v.env_steps,
        "gen_tokens": v.gen_tokens,
        "credited": segment.credit is not None,
    }


def _fork(turn: int, outcome: Any, runs: tuple[bool | None, ...]) -> dict:
    return {"turn": turn, "runs": list(runs), "successes": outcome.successes, "samples": outcome.samples}


def _credit(credit: SegmentCredit | FixedCredit, episode: Episode) -> dict:
    spans = episode.turn_spans()
    turns = [t for t, (start, end) in enumerate(spans) if credit.token_start <= start and end <= credit.token_end]
    return {
        "traj": credit.row,
        "turns": [turns[0], turns[-1]] if turns else [],
        "tokens": [credit.token_start, credit.token_end],
        "value": credit.estimate,
        "policy_tokens": sum(episode.conversation.response_mask[credit.token_start : credit.token_end]),
        "verified": isinstance(credit, SegmentCredit),
    }


def _text(episode: Episode, max_chars: int) -> dict:
    return {
        "observations": [cut(mark.observation, max_chars) for mark in episode.result.marks],
        "actions": [cut(action, max_chars) for action in episode.result.actions],
    }


def cut(text: str, max_chars: int) -> str:
    """The first ``max_chars`` characters of ``text``, and how many more there were."""
    return text if len(text) <= max_chars else f"{text[:max_chars]} ...[+{len(text) - max_chars} chars]"


class GroupLog:
    """Appends records to this process's numbered files in ``log_dir``, each at most ``max_bytes`` (unless one
    record alone is bigger)."""

    def __init__(self, log_dir: str | os.PathLike, max_bytes: int):
        self.log_dir = Path(log_dir)
        self.max_bytes = max_bytes
        self.stem = f"groups-{socket.gethostname()}-{os.getpid()}"
        self.part = 0
        self.size: int | None = None  # of the current part, known after the first write

    def path(self, part: int | None = None) -> Path:
        """The file of ``part`` (default: the one being written)."""
        return self.log_dir / f"{self.stem}-{self.part if part is None else part:04d}.jsonl"

    def write(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` as one line (the folder is created)."""
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode()
        if self.size is None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            while self.path(self.part + 1).exists():  # a resumed run's process may reuse a pid: go on after it
                self.part += 1
            self.size = self.path().stat().st_size if self.path().exists() else 0
        if self.size and self.size + len(line) > self.max_bytes:
            self.part += 1
            self.size = 0
        with open(self.path(), "ab") as f:
            f.write(line)
        self.size += len(line)


_LOGS: dict[tuple[str, int], GroupLog] = {}


def write_group(config: Any, step: Any, episodes: Mapping[int, Episode], global_step: int, uid: Any) -> float:
    """Log one group step where ``config.log_dir`` says (a :class:`~prover_verl.config.ProverConfig`); returns the
    seconds it took (the agent loop counts them in ``prover/log_seconds``).

    A failed write is logged as a warning and training goes on: the log is for reading, not for training.
    """
    started = time.perf_counter()
    record = group_record(step, episodes, global_step=global_step, uid=uid, max_chars=config.log_max_chars)
    key = (config.log_dir, int(config.log_file_mb * 2**20))
    if key not in _LOGS:
        _LOGS[key] = GroupLog(*key)
    try:
        _LOGS[key].write(record)
    except OSError as err:
        logger.warning("group log: could not write to %s: %r", config.log_dir, err)
    return time.perf_counter() - started


def read_groups(log_dir: str | os.PathLike) -> tuple[list[dict], int]:
    """Every record under ``log_dir``, ordered by step and time, and the number of lines that did not parse (a
    line cut by a crash)."""
    records, bad = [], 0
    for path in sorted(Path(log_dir).glob(PATTERN)):
        for line in _lines(path):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                bad += 1
    records.sort(key=lambda r: (r["step"], r["time"]))
    return records, bad


def _lines(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield line
