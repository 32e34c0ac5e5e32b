"""Imitation of an env's expert (seconds to minutes on CPU), so a tiny model wins some episodes and loses others.

A random model never wins an ALFWorld, WebShop or Search-QA episode, so a CPU smoke run with it has no group
with both a success and a failure, and ProVer's judge, verifier and credit never run. ``python -m
prover_verl.imitate --model DIR --env alfworld --data-dir DATA`` trains the model of ``DIR`` in place on the
expert trajectories of the first tasks of the training data (``envs``' own ``expert_actions``), tokenized as the
agent loop tokenizes an episode: the same system prompt and observation messages, through verl's Continuous Token
builder for the model's tokenizer, processor and chat template (with the recipes' ``enable_thinking=false``); the
loss is on the tokens the policy generates (each reply and its end-of-turn token) only, and training stops once the
model, sampled at temperature 1, would replay the expert's replies exactly with probability ``--target-replay``
(mean over the episodes). It is a smoke-test device and says nothing about the method.

The imitation is full-batch and draws nothing, so its weights are a function of its start and of the arithmetic:
it runs on ``--threads`` torch threads (1 by default, whatever the machine's cores) with torch's deterministic
algorithms, and reports the CPU code path torch used (``numerics``). That path is the machine's: torch's AVX512
kernels and its AVX2 ones (``ATEN_CPU_CAPABILITY=avx2``) give KeyDoor's base 0 other bits after its first update
(measured; 1 and 2 threads, and MKL limited to AVX2, gave the same bits), and at learning rate 1e-2 a step is chaotic
(the replay probability moves by orders of magnitude from one step to the next), so a last bit becomes another
base. ``--trace`` keeps the replay probability of every step, and the result says how close the stop came to
flipping (``margin``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pandas as pd
import torch

import envs
from prover_verl.agent import layout
from prover_verl.agent.adapters import make_adapter
from prover_verl.hf_model import load_policy_model

# environment variables that choose a CPU code path (torch's ATen dispatch, MKL's reproducibility branch, oneDNN's
# instruction set): recorded with the arithmetic where set
CPU_PIN_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")
# the recipes' data.apply_chat_template_kwargs (recipes/common.sh): no thinking block is generated
CHAT_TEMPLATE_KWARGS = {"enable_thinking": False}


def expert_conversation(env_name: str, env_kwargs: dict, task_id: str, split: str) -> list[dict]:
    """The agent loop's messages of one expert episode (system, observation, action, observation, ...)."""
    env = envs.make(env_name, split=split, **env_kwargs)
    adapter = make_adapter(env_name, env_kwargs=env_kwargs)
    obs, info = env.reset(options={"task_id": task_id})
    messages = adapter.initial_messages(obs, info)
    for action in env.expert_actions():
        reply = f"<action>{action}</action>" if adapter.tagged_action else action
        messages.append({"role": "assistant", "content": reply})
        obs, _reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
        messages.append({"role": "user", "content": adapter.observation_message(obs, info)})
    return messages


def token_builder(model_dir: str | Path, chat_template_kwargs: dict | None = None):
    """verl's Continuous Token builder for a model directory, made as verl's agent-loop worker makes it (its
    tokenizer, its multimodal processor if it has one, its config's ``model_type``)."""
    from transformers import AutoConfig
    from verl.utils.tokenizer import hf_processor, hf_tokenizer
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    return create_continuous_token_builder(
        hf_tokenizer(model_dir),
        hf_model_type=AutoConfig.from_pretrained(model_dir).model_type,
        chat_template_kwargs=CHAT_TEMPLATE_KWARGS if chat_template_kwargs is None else chat_template_kwargs,
        processor=hf_processor(model_dir),
    )


def assistant_labels(
    builder, messages: list[dict], stop: Sequence[str] = (), inline: bool = False
) -> tuple[list[int], list[int]]:
    """Token ids of a conversation (the first prompt: a system message or none, and a user message; then assistant
    and user in turn) as the env agent loop builds them with ``builder``, and labels that keep only what the policy
    generates, each reply and its end-of-turn token (others -100): the first prompt is rendered with the generation
    prompt, each reply appended as the policy's tokens, each observation laid out by the loop's rule
    (:mod:`prover_verl.agent.layout`; ``inline``: the protocol's ``inline_observations``). A reply that ends with one
    of the protocol's ``stop`` strings has no end-of-turn token of the policy's: the server ends the generation there
    (vLLM's ``stop``)."""
    tokenizer = builder.tokenizer
    eos = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
    # the first prompt ends where the policy first speaks (Search-R1's protocol has no system message)
    first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
    ids = builder.build_initial_tokens(messages[:first])
    labels = [-100] * len(ids)
    for i in range(first, len(messages)):
        if messages[i]["role"] == "assistant":
            content = messages[i]["content"]
            stopped = any(content.endswith(string) for string in stop)
            reply = tokenizer.encode(content, add_special_tokens=False) + ([] if stopped else [eos])
            ids, labels = ids + reply, labels + reply
        elif inline:
            added = layout.inline_tokens(tokenizer, messages[i]["content"])
            ids, labels = ids + added, labels + [-100] * len(added)
        else:
            ids = ids + layout.closing_tokens(ids, tokenizer)
            merged = builder.merge_context_tokens(messages[:i], messages[: i + 1], ids)
            labels += [-100] * (len(merged.token_ids) - len(labels))
            ids = merged.token_ids
    return ids, labels


def token_log_probs(model, batch: list[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per token of ``batch`` (ids, labels; padded to the longest): the log-probability of its label, the mask of
    labelled tokens, and the model's whole log-softmax there (temperature 1)."""
    width = max(len(ids) for ids, _ in batch)
    ids = torch.tensor([i + [0] * (width - len(i)) for i, _ in batch])
    labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in batch])
    attention = torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i, _ in batch])
    logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1].float()
    target = labels[:, 1:]
    log_softmax = torch.log_softmax(logits, -1)
    token_lp = log_softmax.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return token_lp, (target != -100).float(), log_softmax


def replay_log_probs(model, batch: list[tuple[list[int], list[int]]]) -> torch.Tensor:
    """Per episode, the log-probability that the model samples the expert's replies exactly (temperature 1)."""
    token_lp, mask, _ = token_log_probs(model, batch)
    return (token_lp * mask).sum(-1)


def numerics(threads: int) -> dict:
    """What the imitation's arithmetic is on this machine with ``threads`` torch threads: torch's version, the
    threads, the CPU code path torch's kernels dispatch to (AVX2, AVX512, ...: the machine's, unless the environment
    pins it) and the :data:`CPU_PIN_VARIABLES` that are set."""
    pins = {name: os.environ[name] for name in CPU_PIN_VARIABLES if name in os.environ}
    capability = torch.backends.cpu.get_cpu_capability()
    return {"torch": torch.__version__, "threads": threads, "cpu_capability": capability} | pins


@contextlib.contextmanager
def fixed_numerics(threads: int) -> Iterator[None]:
    """Run the block on ``threads`` intra-op threads (a reduction split another way sums in another order) with
    torch's deterministic algorithms, then give the caller's settings back."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    before = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.set_num_threads(before[0])
        torch.use_deterministic_algorithms(before[1])


def stop_margin(trace: Sequence[float], target: float) -> float | None:
    """How far the stop was from flipping: the smallest relative distance to ``target`` of the replay probability
    at the stop and at the step before it (None before a step was taken). A stop decided by a margin near the
    arithmetic's rounding (about 1e-6 relative in float32) is one that another machine's last bit could move."""
    if len(trace) < 2:
        return None
    return min(abs(value - target) / target for value in trace[-2:])


def imitate(
    model_dir: str | Path,
    env_name: str,
    data_dir: str | Path,
    env_kwargs: dict,
    target_replay: float = 0.5,
    max_steps: int = 600,
    lr: float = 1e-2,
    seed: int = 0,
    max_episodes: int | None = None,
    threads: int = 1,
    trace: list[float] | None = None,
) -> dict:
    """Train the model in ``model_dir`` in place on expert episodes of the train parquet's tasks, until it replays
    the expert exactly with mean probability ``target_replay`` over those episodes (or ``max_steps`` run out);
    ``max_episodes`` takes only the first tasks (each step is a pass over every episode).

    Stopping at a replay probability, not after a fixed number of steps, gives a policy that wins some sampled
    episodes and loses others whatever the env's episode length: the groups ProVer needs. The replay probability is
    averaged in float64 from the float32 log-probabilities. ``threads`` torch threads and deterministic algorithms
    (:func:`fixed_numerics`) fix the arithmetic; ``trace``, if given, receives every step's replay probability.
    """
    if not 0.0 < target_replay < 1.0:
        raise ValueError(f"target_replay must be in (0, 1), got {target_replay}")
    if max_episodes is not None and max_episodes < 1:
        raise ValueError(f"max_episodes must be >= 1, got {max_episodes}")
    if max_steps < 0:
        raise ValueError(f"max_steps must be >= 0, got {max_steps}")
    with fixed_numerics(threads):
        return _imitate(
            model_dir, env_name, data_dir, env_kwargs, target_replay, max_steps, lr, seed, max_episodes, trace
        )


def _imitate(
    model_dir: str | Path,
    env_name: str,
    data_dir: str | Path,
    env_kwargs: dict,
    target_replay: float,
    max_steps: int,
    lr: float,
    seed: int,
    max_episodes: int | None,
    trace: list[float] | None,
) -> dict:
    """:func:`imitate`'s training, under the arithmetic its caller fixed."""
    torch.manual_seed(seed)
    rows = pd.read_parquet(Path(data_dir) / "train.parquet")[:max_episodes]
    builder = token_builder(model_dir)
    model = load_policy_model(model_dir)
    adapter = make_adapter(env_name, env_kwargs=env_kwargs)
    batch = []
    for info in rows["extra_info"]:
        messages = expert_conversation(env_name, env_kwargs, info["task_id"], info["split"])
        batch.append(assistant_labels(builder, messages, adapter.stop, adapter.inline_observations))
    tokens = sum(sum(label != -100 for label in labels) for _, labels in batch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for step in range(max_steps + 1):  # step = updates made so far; the replay probability is of these weights
        optimizer.zero_grad()
        log_p = replay_log_probs(model, batch)
        replay = float(log_p.detach().double().exp().mean())
        if trace is not None:
            trace.append(replay)
        if replay >= target_replay or step == max_steps:
            break
        if step % 25 == 0:  # progress: a run of a few hundred steps takes minutes
            print(f"[imitate] step {step}: replay {replay:.3f} (target {target_replay})", file=sys.stderr, flush=True)
        (-log_p.sum() / tokens).backward()
        optimizer.step()
    model.save_pretrained(model_dir)
    return {"episodes": len(batch), "steps": step, "replay_probability": round(replay, 3)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="model directory, trained in place")
    parser.add_argument("--env", required=True, choices=envs.env_names())
    parser.add_argument("--data-dir", required=True, help="directory of train.parquet from prover_verl.data")
    parser.add_argument("--env-kwargs", default="{}", help="JSON constructor arguments of the env")
    parser.add_argument("--target-replay", type=float, default=0.5, help="stop at this expert replay probability")
    parser.add_argument("--max-steps", type=int, default=600)
    parser.add_argument("--lr", type=float, default=1e-2, help="Adam's learning rate (full-batch steps)")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="torch seed (full-batch imitation draws nothing: the start decides the weights)",
    )
    parser.add_argument("--max-episodes", type=int, help="imitate the first N train tasks only (default: all)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: the same sums on any machine)")
    parser.add_argument("--trace", action="store_true", help="also print every step's replay probability")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    trace: list[float] = []
    result = imitate(
        args.model,
        args.env,
        args.data_dir,
        json.loads(args.env_kwargs),
        args.target_replay,
        args.max_steps,
        lr=args.lr,
        seed=args.seed,
        max_episodes=args.max_episodes,
        threads=args.threads,
        trace=trace,
    )
    margin = stop_margin(trace, args.target_replay)
    if margin is not None and margin < 1e-4:
        print(f"[imitate] the stop was {margin:.1e} (relative) from flipping", file=sys.stderr, flush=True)
    record = {**result, "replay": trace[-1] if trace else None, "margin": margin}
    record |= {"numerics": numerics(args.threads), "seconds": round(time.perf_counter() - start, 1)}
    if args.trace:
        record["trace"] = trace
    print(json.dumps(record))


if __name__ == "__main__":
    main()
