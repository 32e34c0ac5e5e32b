"""Does a policy read KeyDoor's note? Its probability of each key at the key room, by the colour the note names.

A policy that reads the note takes the red key when the note says red and the blue key when it says blue; one that
does not takes each with the same probability whatever the note says, and can win at most the share of doors it
guesses. On every held-out task the expert's episode is rendered as the agent loop renders it
(:func:`prover_verl.imitate.expert_conversation`) up to the key room, and the policy's probability of the reply
``<action>take <colour> key</action>`` is read for each door colour, per note colour.

    python benchmarks/keydoor_probe.py --model DIR [--checkpoint ACTOR_PT] --name NAME

``--checkpoint`` loads a verl FSDP actor checkpoint (``global_step_N/actor/model_world_size_1_rank_0.pt``) into the
model of ``--model``. It prints a table and writes ``benchmarks/results/keydoor_probe/<NAME>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.provenance import command_line  # noqa: E402
from envs.keydoor.env import COLOURS, KeyDoorEnv  # noqa: E402
from prover_verl.hf_model import load_policy_model  # noqa: E402
from prover_verl.imitate import assistant_labels, expert_conversation, token_builder, token_log_probs  # noqa: E402

HARD = {"doors": 2, "note_at_keys": True, "early_pivot": True}


def reply_probability(model, builder, messages: list[dict]) -> float:
    """The policy's probability of the last message of ``messages`` (an assistant reply), end of turn included."""
    ids, labels = assistant_labels(builder, messages)
    last = max(i for i, label in enumerate(labels) if label != -100 and (i == 0 or labels[i - 1] == -100))
    labels = [label if i >= last else -100 for i, label in enumerate(labels)]
    with torch.no_grad():
        log_p, mask, _ = token_log_probs(model, [(ids, labels)])
    return float((log_p * mask).sum().exp())


def probe(model_dir: Path, checkpoint: Path | None, env_kwargs: dict[str, Any], split: str = "eval") -> dict[str, Any]:
    """Mean probability of taking each door colour's key at the key room, per note colour, over ``split``'s tasks."""
    model = load_policy_model(model_dir).eval()
    if checkpoint is not None:
        state = torch.load(checkpoint, map_location="cpu", weights_only=False)
        state = {k: v.full_tensor() if hasattr(v, "full_tensor") else v for k, v in state.items()}
        missing, unexpected = model.load_state_dict(state, strict=False)
        if unexpected or missing:
            raise ValueError(f"{checkpoint} does not fit {model_dir}: missing {missing}, unexpected {unexpected}")
    return read_note(model, token_builder(model_dir), env_kwargs, split)


def read_note(model, builder, env_kwargs: dict[str, Any], split: str = "eval") -> dict[str, Any]:
    """:func:`probe` of a model in memory (in eval mode) and its Continuous Token builder."""
    env = KeyDoorEnv(split=split, **env_kwargs)
    colours = COLOURS[: env_kwargs.get("doors", len(COLOURS))]
    sums = {note: dict.fromkeys(colours, 0.0) for note in colours}
    counts = dict.fromkeys(colours, 0)
    for task in env.table.tasks:
        messages = expert_conversation("keydoor", env_kwargs, task.task_id, split)
        upto = 1 + 2 * task.pivot_turn  # system, then (observation, reply) per turn: the key room's observation
        note = COLOURS[task.door]
        counts[note] += 1
        for colour in colours:
            asked = [*messages[: upto + 1], {"role": "assistant", "content": f"<action>take {colour} key</action>"}]
            sums[note][colour] += reply_probability(model, builder, asked)
    return {
        "tasks": counts,
        "p_take": {note: {c: sums[note][c] / counts[note] for c in colours} for note in colours if counts[note]},
    }


def render(report: dict[str, Any], part: str = "table") -> str:
    """The markdown table of a probe's results file (``part`` is ``table``, the only one)."""
    if part != "table":
        raise ValueError(f"unknown part {part!r} of a probe report; only 'table'")
    colours = list(report["p_take"])
    lines = [
        "| note says | " + " | ".join(f"P(take {c} key)" for c in colours) + " | tasks |",
        "|---|" + "---|" * (len(colours) + 1),
    ]
    for note, row in report["p_take"].items():
        lines.append(f"| {note} | " + " | ".join(f"{row[c]:.3f}" for c in colours) + f" | {report['tasks'][note]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--env-kwargs", default=json.dumps(HARD))
    parser.add_argument("--name", required=True, help="results file name")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "keydoor_probe")
    args = parser.parse_args(argv)
    result = probe(args.model, args.checkpoint, json.loads(args.env_kwargs))
    print(render(result))
    # machine paths stay out of the committed file: the name says which model was probed
    report = {"command": command_line("benchmarks/keydoor_probe.py", argv)}
    report |= {"env_kwargs": json.loads(args.env_kwargs), **result}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


if __name__ == "__main__":
    main()
