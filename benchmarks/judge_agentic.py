"""The agentic judge against the one-shot prompt on long trajectories: pivot hit rate and judge tokens per group.

    python benchmarks/judge_agentic.py                       # 100 pairs at 10 and 50 turns; about a minute
    python benchmarks/judge_agentic.py --pairs 20 --turns 50 --out /tmp/judge_agentic.json

What this measures, plainly: no trained model here can use tools, so the judge is a **scripted policy** served by
tests/judge/scripted_openai_server.py (a real OpenAI-compatible server process, reached through
``judge.type=openai`` unchanged). The policy applies one rule in every mode to whatever text the mode lets it see:
the decisive turn is the one before the first observation of the success that shows the key in hand. One-shot, it
scans the prompt; if the prompt was cut so that no observation shows it, it falls back to the first turn where the
actions differ (what the heuristic judge proposes). Agentic, it bisects the success's observations with
``read_turns`` calls of one turn each, then answers. So the table shows what each mode makes *reachable* and what it
costs in tokens, not how well a model reads; the tokens are the server's word-piece counts (``\\w+`` runs and
punctuation marks), the same counter for every mode.

The pairs are KeyDoor's task at ALFWorld's length: a corridor of ``--turns`` rooms with ~300-character
observations (the JSON records the mean); a note names the key's colour, a later room holds keys of every colour,
and the inventory line (at the end of each observation, as ALFWorld's lists sit at the end of its) shows the key
once taken. Both trajectories act at random in the other rooms (so their actions differ long before the pivot); the
success takes the right key in the key room, the failure a wrong one. The pivot is the key room's turn. Prints a
table and writes a JSON file.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from prover_verl.config import JudgeConfig
from prover_verl.judge import Trajectory, make_judge
from prover_verl.judge.divergence import lasting_divergence
from prover_verl.judge.heuristic import first_divergence

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "judge" / "scripted_openai_server.py"
COLOURS = ("red", "blue", "green", "yellow", "white", "black")
FILLER_ACTIONS = ("walk on", "look around", *(f"take {c} key" for c in COLOURS))
FURNITURE = (
    "a dusty armchair",
    "a shelf of old books",
    "a faded rug",
    "a cold fireplace",
    "a tall window with heavy curtains",
    "a grandfather clock",
    "a stack of crates",
    "a painting of a ship",
    "a cracked mirror",
    "a wooden bench",
)
TASK = "Walk to the end of the corridor and open the door. Find out which key opens it and take that key."


def make_pair(rng: random.Random, turns: int, pair_id: int) -> tuple[Trajectory, Trajectory]:
    """A success and a failure of one corridor of ``turns`` rooms; the success's ``pivot_turn`` is the key room."""
    note = rng.randrange(1, max(2, turns // 4))
    pivot = rng.randrange(note + 2, turns - 2)
    right = rng.choice(COLOURS)
    wrong = rng.choice([c for c in COLOURS if c != right])
    rooms = []
    for t in range(turns):
        things = ", ".join(rng.sample(FURNITURE, 6))
        text = f"[room {t + 1}/{turns}] You are in a long hall. Around you: {things}. " + " ".join(
            rng.choice(["The floor creaks.", "A draught blows.", "Dust hangs in the air.", "It is quiet."])
            for _ in range(6)
        )
        if t == note:
            text += f" A note on the wall reads: the door opens with the {right} key."
        if t == pivot:
            text += " On a table lie keys: " + ", ".join(COLOURS) + "."
        if t == turns - 1:
            text += " A locked door blocks the way."
        rooms.append(text)

    def play(success: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
        actions = [rng.choice(FILLER_ACTIONS) for _ in range(turns)]
        actions[pivot] = f"take {right if success else wrong} key"
        actions[-1] = "open door"
        held = right if success else wrong
        observations = tuple(
            room + (f" You carry a {held} key." if t > pivot else " Your hands are empty.")
            for t, room in enumerate(rooms)
        )
        return observations, tuple(actions)

    win_obs, win_actions = play(True)
    lose_obs, lose_actions = play(False)
    return (
        Trajectory(2 * pair_id, TASK, win_obs, win_actions, True, pivot),
        Trajectory(2 * pair_id + 1, TASK, lose_obs, lose_actions, False, pivot),
    )


# ---- the scripted judge policy (runs in the server process: it sees only the requests) ----

TURN_LINE = re.compile(r"^\[turn (\d+)\] (observation|action): (.*)$", re.MULTILINE)
CARRY = "You carry a"


def _answer(label: str, turn: int, why: str) -> dict:
    return {"content": json.dumps({"trajectory": label, "start_turn": turn, "end_turn": turn, "reason": why})}


def _turns(text: str) -> dict[int, dict[str, str]]:
    turns: dict[int, dict[str, str]] = {}
    for turn, kind, value in TURN_LINE.findall(text):
        turns.setdefault(int(turn), {})[kind] = value
    return turns


def _first_difference(a: dict[int, dict[str, str]], b: dict[int, dict[str, str]]) -> int:
    shared = [t for t in sorted(a) if t in b and a[t].get("action") != b[t].get("action")]
    return shared[0] if shared else 0


def reader_policy(body: dict) -> dict:
    """The scripted judge: one rule (the turn before the first observation showing the key in hand), applied to
    the one-shot prompt as it was cut, or reached by bisecting with ``read_turns`` (agentic)."""
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    target = re.search(r"span of turns in trajectory ([AB])", system).group(1)
    if not body.get("tools"):  # one-shot: everything it gets is in the prompt
        parts = re.split(r"^Trajectory ([AB]) \(", user, flags=re.MULTILINE)
        by_label = {parts[i]: _turns(parts[i + 1]) for i in range(1, len(parts), 2)}
        mine, other = by_label[target], by_label["B" if target == "A" else "A"]
        carrying = [t for t in sorted(mine) if CARRY in mine[t].get("observation", "")]
        if carrying:
            return _answer(target, carrying[0] - 1, "the key was taken here")
        return _answer(target, _first_difference(mine, other), "first different action (the key is cut off)")
    turns = int(re.search(rf"Trajectory {target}: \w+, (\d+) turns", user).group(1))
    first_diff = int(m.group(1)) if (m := re.search(r"first act differently at turn (\d+)", user)) else 0
    seen: dict[int, bool] = {}
    for message in body["messages"][2:]:
        if message["role"] == "tool" and message["content"].startswith(f"Trajectory {target} "):
            for turn, kind, value in TURN_LINE.findall(message["content"]):
                if kind == "observation":
                    seen[int(turn)] = CARRY in value
        elif message["role"] == "tool" and message["content"].startswith("error"):
            return _answer(target, first_diff, "a tool failed")
    lo = max([t for t, carry in seen.items() if not carry], default=0) + 1
    hi = min([t for t, carry in seen.items() if carry], default=turns - 1)
    if lo >= hi:
        return _answer(target, hi - 1, "the key is in hand from the next turn on")
    mid = (lo + hi) // 2
    call = {"name": "read_turns", "arguments": {"trajectory": target, "start": mid, "end": mid}}
    return {"tool_calls": [call]}


# ---- the measurement ----

# a mode is a judge without an LLM (a function of the pair) or the openai judge's config overrides
MODES = {
    "heuristic (first divergence, no LLM)": first_divergence,
    "divergence (lasting observation difference, no LLM)": lasting_divergence,
    "one-shot, prompt cut to 16000 chars (default)": {"max_prompt_chars": 16000},
    "one-shot, whole prompt (no budget)": {"max_prompt_chars": None},
    "agentic (max_calls 8, token_budget 32000)": {"mode": "agentic"},
}


async def judge_pairs(url: str, pairs: list[tuple[Trajectory, Trajectory]], overrides: dict | Callable) -> dict:
    """Hit rate, statuses, tokens and replies per group of one mode over ``pairs``."""
    statuses, hits, tokens, calls, seconds = [], [], [], [], []
    for i, (win, lose) in enumerate(pairs):
        if callable(overrides):
            proposal, status, spent, tool_calls = overrides(win, lose), "ok", 0, ()
            elapsed = 0.0
        else:
            config = JudgeConfig(type="openai", url=url, model="scripted", api_key_env=None, **overrides)
            judge = make_judge(config, "success", seed=i)
            started = time.perf_counter()
            judgement = await judge.judgement([win, lose])
            elapsed = time.perf_counter() - started
            proposal, status, spent, tool_calls = (
                judgement.proposal,
                str(judgement.status),
                judgement.tokens,
                judgement.tool_calls,
            )
        statuses.append(status)
        hits.append(proposal is not None and proposal.start_turn <= win.pivot_turn <= proposal.end_turn)
        tokens.append(spent or 0)
        calls.append(len({c["call"] for c in tool_calls}))
        seconds.append(elapsed)
    return {
        "groups": len(pairs),
        "hit_rate": sum(hits) / len(pairs),
        "statuses": {s: statuses.count(s) for s in sorted(set(statuses))},
        "tokens_per_group_mean": statistics.mean(tokens),
        "tokens_per_group_max": max(tokens),
        "tool_replies_per_group_mean": statistics.mean(calls),
        "judge_seconds_per_group_mean": statistics.mean(seconds),
    }


def load_server_module():
    spec = importlib.util.spec_from_file_location("scripted_openai_server", SERVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render(report: dict, part: str = "table") -> str:
    """The docs' markdown table of a results file (``part`` is ``table``, the only one)."""
    if part != "table":
        raise ValueError(f"unknown part {part!r} of a judge_agentic report; only 'table'")
    lines = [
        "| turns | judge | pivot hit rate | judge tokens / group | replies with tool calls / group |",
        "|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        replies = f"{r['tool_replies_per_group_mean']:.1f}" if r["tool_replies_per_group_mean"] else "–"
        lines.append(
            f"| {r['turns']} | {r['mode']} | {r['hit_rate']:.2f} | {r['tokens_per_group_mean']:,.0f} | {replies} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100, help="pairs per trajectory length (default 100)")
    parser.add_argument("--turns", type=int, nargs="+", default=[10, 50], help="trajectory lengths (default 10 50)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "judge_agentic" / "judge_agentic.json"
    )
    args = parser.parse_args(argv)
    server = load_server_module()
    process, url = server.serve(policy=f"{Path(__file__).resolve()}:reader_policy")
    try:
        results = []
        for turns in args.turns:
            rng = random.Random(args.seed * 1000 + turns)
            pairs = [make_pair(rng, turns, i) for i in range(args.pairs)]
            chars = statistics.mean(len(o) for win, _ in pairs for o in win.observations)
            for mode, overrides in MODES.items():
                row = asyncio.run(judge_pairs(url, pairs, overrides))
                results.append({"turns": turns, "mean_observation_chars": round(chars), "mode": mode, **row})
    finally:
        process.kill()
        process.wait()
    header = f"{'turns':>5}  {'mode':<46} {'hit rate':>8} {'tokens/group':>12} {'max':>6} {'replies':>7}  statuses"
    print(header)
    for r in results:
        print(
            f"{r['turns']:>5}  {r['mode']:<46} {r['hit_rate']:>8.2f} {r['tokens_per_group_mean']:>12.0f} "
            f"{r['tokens_per_group_max']:>6} {r['tool_replies_per_group_mean']:>7.1f}  {r['statuses']}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/judge_agentic.py " + " ".join(argv if argv is not None else sys.argv[1:])
    args.out.write_text(json.dumps({"command": command.strip(), "seed": args.seed, "rows": results}, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
