"""Which tiny model learns to read KeyDoor's note, and at what cost (issue 30, item 4).

In the hard variant the right key is named by a note in the key room, and the learning benchmark's tiny model (2
layers, hidden 64) takes either key alike whatever the note says (``benchmarks/keydoor_probe.py``). Here each size
of the tiny model family (dense Qwen3, ``prover_verl.tiny_model.family_sizes``; the env's BPE vocabulary of 512)
imitates the expert's first two replies (``walk on``, then ``take <the note's colour> key``) on ``--tasks`` train
tasks, rendered as the agent loop renders them, in mini-batches of ``--batch`` (Adam, ``--lr``). The key is one
token an episode, so the other replies are fit within the first hundred steps and the rest of the training is
about the key. Every ``--every`` steps the probe reads, on the 64 held-out tasks, the probability of taking the
note's key and of taking the other: their gap is what the model reads (0: it picks a colour whatever the note says).

    python benchmarks/keydoor_reading.py --sizes 2x64,4x64 --steps 2000

It prints a table (size, parameters, the probabilities at the last step, the first step with a gap of at least
``--read-gap``, seconds a step and their ratio to the first size's, measured in the same run) and writes
``benchmarks/results/keydoor_reading/<--name>.json``. Torch's threads are set by ``--threads`` (one a size, so two
sizes can be run at once on 2 cores without changing each other's timing much).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.keydoor_probe import HARD, read_note  # noqa: E402
from benchmarks.provenance import code_commit, command_line  # noqa: E402
from envs.keydoor.env import KeyDoorEnv  # noqa: E402
from prover_verl import tiny_model  # noqa: E402
from prover_verl.hf_model import load_policy_model  # noqa: E402
from prover_verl.imitate import assistant_labels, expert_conversation, token_builder, token_log_probs  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "keydoor_reading"


def first_replies(env_kwargs: dict[str, Any], tasks: int) -> list[list[dict]]:
    """The expert's episodes of the first ``tasks`` train tasks up to the key room's reply (system, room 1, its
    reply, the key room, the key taken)."""
    kwargs = env_kwargs | {"num_tasks": tasks}
    ids = KeyDoorEnv(split="train", **kwargs).task_ids()
    return [expert_conversation("keydoor", kwargs, task_id, "train")[:5] for task_id in ids]


def reading(p_take: dict[str, dict[str, float]], tasks: dict[str, int]) -> tuple[float, float]:
    """From a probe: the probability of taking the note's key and the mean probability of taking another door's,
    each averaged over the held-out tasks."""
    total = sum(tasks[note] for note in p_take)
    note = sum(tasks[n] * row[n] for n, row in p_take.items()) / total
    other = sum(tasks[n] * sum(p for c, p in row.items() if c != n) / (len(row) - 1) for n, row in p_take.items())
    return note, other / total


def train_size(layers: int, hidden: int, args: argparse.Namespace) -> dict[str, Any]:
    """Imitate with one size of the family; its reading curve, parameters and seconds a step."""
    model_dir = tiny_model.build(
        args.work / f"{layers}x{hidden}",
        seed=args.seed,
        corpus_env="keydoor",
        sizes=tiny_model.family_sizes(layers, hidden),
    )
    builder = token_builder(model_dir)
    model = load_policy_model(model_dir)
    batch = [assistant_labels(builder, messages) for messages in first_replies(args.env_kwargs, args.tasks)]
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    draws = torch.Generator().manual_seed(args.seed)
    curve, trained = [], 0.0
    for step in range(args.steps + 1):
        if step % args.every == 0 or step == args.steps:
            model.eval()
            probe = read_note(model, builder, args.env_kwargs)
            note, other = reading(probe["p_take"], probe["tasks"])
            curve.append({"step": step, "p_note": round(note, 4), "p_other": round(other, 4)})
            print(
                f"[reading] {layers}x{hidden} step {step}: P(note's key) {note:.3f}, P(other) {other:.3f}", flush=True
            )
            model.train()
        if step == args.steps:
            break
        start = time.perf_counter()
        picked = torch.randperm(len(batch), generator=draws)[: args.batch].tolist()
        log_p, mask, _ = token_log_probs(model, [batch[i] for i in picked])
        optimizer.zero_grad()
        (-(log_p * mask).sum() / mask.sum()).backward()
        optimizer.step()
        trained += time.perf_counter() - start
    read = next((p["step"] for p in curve if p["p_note"] - p["p_other"] >= args.read_gap), None)
    return {
        "size": f"{layers}x{hidden}",
        "params": sum(p.numel() for p in model.parameters()),
        "curve": curve,
        "first_step_reading": read,
        "seconds_per_step": trained / max(args.steps, 1),
    }


def render(report: dict[str, Any], part: str = "table") -> str:
    """The markdown table of a results file (``part`` is ``table``, the only one)."""
    if part != "table":
        raise ValueError(f"unknown part {part!r} of a reading report; only 'table'")
    gap = report["settings"]["read_gap"]
    lines = [
        "| size (layers x hidden) | Adam's lr | parameters | steps | P(note's key) | P(other key) | "
        f"first step with a gap >= {gap} | seconds a step (× the first size's) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base = report["sizes"][0]["seconds_per_step"]
    for size in report["sizes"]:
        last = size["curve"][-1]
        read = "—" if size["first_step_reading"] is None else f"{size['first_step_reading']:,}"
        ratio = size["seconds_per_step"] / base if base else float("nan")
        lines.append(
            f"| {size['size']} | {report['settings']['lr']:g} | {size['params']:,} | {last['step']:,} | "
            f"{last['p_note']:.3f} | {last['p_other']:.3f} | {read} | {size['seconds_per_step']:.2f} (×{ratio:.1f}) |"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2x64,4x64", help="comma-separated LAYERSxHIDDEN of the tiny model family")
    parser.add_argument("--tasks", type=int, default=1024, help="train tasks imitated")
    parser.add_argument("--batch", type=int, default=64, help="episodes a step")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--every", type=int, default=250, help="steps between probes")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0, help="initial weights and the mini-batches' draws")
    parser.add_argument("--read-gap", type=float, default=0.2, help="P(note's key) - P(other) that counts as reading")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--env-kwargs", default=json.dumps(HARD))
    parser.add_argument("--work", type=Path, default=Path("/tmp/prover_keydoor_reading"), help="the models")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--name", default="results", help="results file name (without .json)")
    args = parser.parse_args(argv)
    try:
        args.size_list = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes {args.sizes!r}: comma-separated LAYERSxHIDDEN, e.g. 2x64,4x64")
    if any(len(s) != 2 for s in args.size_list):
        parser.error(f"--sizes {args.sizes!r}: comma-separated LAYERSxHIDDEN, e.g. 2x64,4x64")
    for flag in ("tasks", "batch", "steps", "every", "threads"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag} {getattr(args, flag)} must be at least 1")
    args.env_kwargs = json.loads(args.env_kwargs)
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    commit = code_commit()
    sizes = [train_size(layers, hidden, args) for layers, hidden in args.size_list]
    settings = {k: v for k, v in vars(args).items() if k not in ("work", "out", "name", "size_list")}
    report = {"command": command_line("benchmarks/keydoor_reading.py", argv), "commit": commit}
    report |= {"settings": settings, "sizes": sizes}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(report, indent=1) + "\n")
    print(render(report))
    return report


if __name__ == "__main__":
    main()
