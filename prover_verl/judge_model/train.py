"""Train a tiny judge model on CPU and score it on held-out tasks beside the heuristic and the random judge.

``python -m prover_verl.judge_model.train --out DIR [--env keydoor] [--env-kwargs JSON]`` plays success/failure
pairs on the env's train split (:mod:`~prover_verl.judge_model.pairs`), renders each with the judge's own prompt at
a prompt budget drawn from ``--budgets`` (a pair cut to fit or too long for a budget is what the loop's judge sees
or skips), trains a model of the tiny model family (:mod:`prover_verl.tiny_model`, dense, sizes from the flags)
on the answers naming the pivot, saves it to ``DIR`` as a Hugging Face model directory (what
``recipes/judge/serve_judge.sh`` serves), then scores it, the heuristic judge and the random judge on pairs of the
env's held-out split and writes ``DIR/results.json`` (and ``--results``; ``python -m prover_verl.judge_model.report``
renders it as the docs' table).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, GenerationConfig

import envs
from prover_verl import tiny_model
from prover_verl.config import JudgeConfig
from prover_verl.judge.base import SegmentSide, segment_side_of
from prover_verl.judge.heuristic import HeuristicJudge
from prover_verl.judge.llm import LLMJudge
from prover_verl.judge.random_segment import RandomSegmentJudge
from prover_verl.judge_model.examples import encode_example, prompt_chars, render_example
from prover_verl.judge_model.pairs import Pair, make_pairs
from prover_verl.judge_model.scoring import LocalChatBackend, Score, score

# the keydoor recipes' judge.max_prompt_chars, 3 * (512 + 1536 - 512) (recipes/common.sh), and a budget tight
# enough that long pairs are cut to fit and the longest cannot fit at all
DEFAULT_BUDGETS = (4608, 3000)
PROMPT_CLASSES = ("fits", "cut", "too_long")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """What :func:`train_judge` trains on and how.

    Attributes:
        side: Where the segment must lie (``algorithm.prover.segment_side``): the prompt asks for that trajectory.
        budgets: Prompt budgets (``judge.max_prompt_chars``) each training prompt is rendered at, one drawn per
            example.
        max_obs_chars: ``judge.max_obs_chars``.
        steps: Optimizer steps.
        batch_size: Examples per step.
        lr: Peak AdamW learning rate (linear warm-up over the first 5 % of steps, then cosine to a tenth).
        prompt_weight: Weight of the auxiliary language-model loss on the prompt's tokens (:func:`answer_loss`).
        seed: Seeds the model's initialisation, the example draws and their prompts' order and nonce.
    """

    side: SegmentSide = SegmentSide.SUCCESS
    budgets: tuple[int | None, ...] = DEFAULT_BUDGETS
    max_obs_chars: int = 600
    steps: int = 600
    batch_size: int = 8
    lr: float = 5e-3
    prompt_weight: float = 0.5
    seed: int = 0


def build_model(pairs: Sequence[Pair], vocab_size: int, sizes: dict[str, int], seed: int, env_name: str):
    """A random-init dense model of the tiny model family and its tokenizer, whose BPE merges are also learnt from
    the env's texts and from judge prompts and answers of ``pairs`` (so a prompt takes ~1k tokens, not ~2k)."""
    rng = random.Random(seed)
    texts = tiny_model.env_corpus(env_name)
    for pair in pairs[:64]:
        rendered = render_example(pair, SegmentSide.SUCCESS, rng, 600, None)
        texts += [m["content"] for m in rendered[0]] + [rendered[1]]
    tokenizer = tiny_model.build_tokenizer(vocab_size, texts)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_model.model_config("qwen3", tokenizer, **sizes), dtype=torch.float32)
    eos, pad = tokenizer.convert_tokens_to_ids(tiny_model.EOS), tokenizer.convert_tokens_to_ids(tiny_model.PAD)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad)
    return model, tokenizer


def answer_loss(model, tokenizer, batch: Sequence[tuple[list[int], list[int]]], prompt_weight: float = 0.0):
    """Mean negative log-likelihood of the labelled (answer) tokens of ``batch``, plus ``prompt_weight`` times that
    of the other tokens (the prompt).

    The prompt term is an auxiliary language-model loss: a pair's two trajectories repeat much of each other's
    text, and predicting it teaches the model to copy from earlier in its context, which naming the pivot needs
    (with the answer's loss alone the tiny model answered a constant label and turn after 300 steps). Sequences
    are padded on the right and run without an attention mask: attention is causal, so no real token sees the
    padding after it, and the masked path (about twice the cost on CPU) is not taken. With ``prompt_weight`` 0 the
    language-model head runs only where a label is.
    """
    width = max(len(ids) for ids, _ in batch)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([i + [pad] * (width - len(i)) for i, _ in batch])
    labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in batch])
    lengths = torch.tensor([len(i) for i, _ in batch])
    target = labels[:, 1:]
    hidden = model.model(input_ids=ids).last_hidden_state[:, :-1]
    rows, cols = torch.nonzero(target != -100, as_tuple=True)
    loss = torch.nn.functional.cross_entropy(model.lm_head(hidden[rows, cols]).float(), target[rows, cols])
    if prompt_weight:
        in_prompt = (target == -100) & (torch.arange(width - 1)[None] < (lengths[:, None] - 1))
        rows, cols = torch.nonzero(in_prompt, as_tuple=True)
        logits = model.lm_head(hidden[rows, cols]).float()
        loss = loss + prompt_weight * torch.nn.functional.cross_entropy(logits, ids[:, 1:][rows, cols])
    return loss


def train_judge(model, tokenizer, pairs: Sequence[Pair], config: TrainConfig, log_every: int = 50) -> dict[str, Any]:
    """Train ``model`` in place on ``pairs`` rendered afresh each draw (a new order, nonce and budget); returns the
    loss curve (mean loss per ``log_every`` steps) and the examples skipped as too long."""
    rng = random.Random(config.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
    warmup = max(1, config.steps // 20)

    def lr_at(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, config.steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    model.train()
    curve, window, skipped = [], [], 0
    for step in range(config.steps):
        batch = []
        while len(batch) < config.batch_size:
            pair, budget = rng.choice(pairs), rng.choice(config.budgets)
            rendered = render_example(pair, config.side, rng, config.max_obs_chars, budget)
            if rendered is None:  # the judge skips such a pair (too_long): nothing to answer
                skipped += 1
                continue
            batch.append(encode_example(tokenizer, *rendered))
        loss = answer_loss(model, tokenizer, batch, config.prompt_weight)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        window.append(loss.item())
        if len(window) == log_every or step == config.steps - 1:
            curve.append(round(sum(window) / len(window), 4))
            print(f"[judge_model] step {step + 1}/{config.steps}: loss {curve[-1]}", file=sys.stderr, flush=True)
            window = []
    model.eval()
    return {"loss_curve": curve, "skipped_too_long": skipped}


def prompt_class(pair: Pair, side: SegmentSide, max_obs_chars: int, budget: int | None) -> str:
    """``fits`` (the prompt as rendered at ``max_obs_chars``), ``cut`` (cut shorter to fit ``budget``) or
    ``too_long`` (not even at the shortest cut; the judge skips it)."""
    if budget is None or prompt_chars(pair, side, max_obs_chars) <= budget:
        return "fits"
    return "too_long" if render_example(pair, side, random.Random(0), max_obs_chars, budget) is None else "cut"


def held_out_scores(
    model, tokenizer, pairs: Sequence[Pair], config: TrainConfig, max_tokens: int, seed: int = 0
) -> dict[str, Any]:
    """The model (the loop's LLM judge over :class:`LocalChatBackend`), the heuristic and the random judge on
    ``pairs``, pair ``i`` at budget ``budgets[i % len(budgets)]``: rates over all pairs, per budget and per prompt
    class (:data:`PROMPT_CLASSES`)."""
    budgets = config.budgets
    backend = LocalChatBackend(model, tokenizer, max_tokens)
    by_budget = {b: [p for i, p in enumerate(pairs) if budgets[i % len(budgets)] == b] for b in budgets}
    classes = {
        b: [prompt_class(p, config.side, config.max_obs_chars, b) for p in group] for b, group in by_budget.items()
    }
    judges = {
        "model": lambda b: LLMJudge(
            backend, JudgeConfig(max_obs_chars=config.max_obs_chars, max_prompt_chars=b), config.side, seed=seed
        ),
        "heuristic": lambda b: HeuristicJudge(config.side, seed=seed),
        "random": lambda b: RandomSegmentJudge(config.side, seed=seed),
    }
    results: dict[str, Any] = {"overall": {}, "by_budget": {}, "by_prompt": {}}
    for name, make in judges.items():
        total, per_class = Score(), {c: Score() for c in PROMPT_CLASSES}
        results["by_budget"].setdefault(name, {})
        for budget, group in by_budget.items():
            scored, outcomes = score(make(budget), group, config.side)
            results["by_budget"][name][str(budget)] = scored.rates()
            for outcome, klass in zip(outcomes, classes[budget], strict=True):
                total.add(outcome)
                per_class[klass].add(outcome)
        results["overall"][name] = total.rates()
        results["by_prompt"][name] = {c: s.rates() for c, s in per_class.items()}
    return results


def command_line(argv: Sequence[str]) -> str:
    """The command as run, its output paths written as ``DIR`` and ``RESULTS`` (no machine path in the results)."""
    shown, hide = [], {"--out": "DIR", "--results": "RESULTS"}
    for i, arg in enumerate(argv):
        shown.append(hide[argv[i - 1]] if i and argv[i - 1] in hide else arg)
    return " ".join(["python -m prover_verl.judge_model.train", *shown])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="model directory to write")
    parser.add_argument("--env", default="keydoor", choices=envs.env_names(), help="an env that reports pivot_turn")
    parser.add_argument("--env-kwargs", default="{}", help="JSON constructor arguments of the env (env.kwargs)")
    parser.add_argument("--segment-side", default="success", help="algorithm.prover.segment_side")
    parser.add_argument("--train-pairs", type=int, default=1024, help="pairs played on the train split")
    parser.add_argument("--eval-pairs", type=int, default=256, help="pairs played on the held-out split")
    parser.add_argument("--budgets", default=",".join(map(str, DEFAULT_BUDGETS)), help="judge.max_prompt_chars values")
    parser.add_argument("--max-obs-chars", type=int, default=600, help="judge.max_obs_chars")
    parser.add_argument("--max-tokens", type=int, default=96, help="longest answer scored (judge.max_tokens)")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--prompt-weight", type=float, default=0.5, help="auxiliary loss on the prompt's tokens")
    parser.add_argument("--hidden-size", type=int, default=64, help="the tiny model's is 64")
    parser.add_argument("--layers", type=int, default=2, help="the tiny model's is 2")
    parser.add_argument("--vocab-size", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results", help="also write the results JSON here")
    args = parser.parse_args(argv)
    env_kwargs = json.loads(args.env_kwargs)
    budgets = tuple(None if b == "none" else int(b) for b in args.budgets.split(","))
    config = TrainConfig(
        segment_side_of(args.segment_side),
        budgets,
        args.max_obs_chars,
        args.steps,
        args.batch_size,
        args.lr,
        args.prompt_weight,
        args.seed,
    )
    spec = envs.spec(args.env)
    started = time.perf_counter()
    train_pairs = make_pairs(args.env, env_kwargs, spec.train_split, args.train_pairs, args.seed)
    eval_pairs = make_pairs(args.env, env_kwargs, spec.val_split, args.eval_pairs, args.seed + 1)
    sizes = tiny_model.family_sizes(args.layers, args.hidden_size)
    model, tokenizer = build_model(train_pairs, args.vocab_size, sizes, args.seed, args.env)
    training = train_judge(model, tokenizer, train_pairs, config)
    train_seconds = time.perf_counter() - started
    out = Path(args.out)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    started = time.perf_counter()
    held_out = held_out_scores(model, tokenizer, eval_pairs, config, args.max_tokens)
    results = {
        "command": command_line(argv if argv is not None else sys.argv[1:]),
        "env": args.env,
        "env_kwargs": env_kwargs,
        "segment_side": config.side.value,
        "budgets": list(budgets),
        "max_obs_chars": config.max_obs_chars,
        "model": {**sizes, "vocab_size": len(tokenizer), "params": sum(p.numel() for p in model.parameters())},
        "training": {
            "split": spec.train_split,
            "tasks": len({p.task_id for p in train_pairs}),
            "pairs": len(train_pairs),
            "steps": config.steps,
            "batch_size": config.batch_size,
            "lr": config.lr,
            "prompt_weight": config.prompt_weight,
            "seconds": round(train_seconds, 1),
            **training,
        },
        "held_out": {
            "split": spec.val_split,
            "tasks": len({p.task_id for p in eval_pairs}),
            "seconds": round(time.perf_counter() - started, 1),
            **held_out,
        },
    }
    text = json.dumps(results, indent=1) + "\n"
    (out / "results.json").write_text(text)
    if args.results:
        Path(args.results).parent.mkdir(parents=True, exist_ok=True)
        Path(args.results).write_text(text)
    print(json.dumps({"out": str(out), **results["held_out"]["overall"]}))


if __name__ == "__main__":
    main()
