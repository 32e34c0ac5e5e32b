"""Training and validation data for the ProVer agent loop: one parquet row per task of an environment.

``python -m prover_verl.data --env alfworld --out ~/data/prover/alfworld`` lists the tasks of the env's train
and validation splits and writes ``train.parquet`` and ``val.parquet`` in the row format verl's RLHFDataset
reads. The agent loop builds its prompts from the environment itself; the ``prompt`` column only names the
task (verl's dataset requires one). Validation rows carry ``verify: false``, so ProVer never runs on them.

``--protocol NAME`` (or ``"protocol"`` in ``--env-kwargs``) plays the env under one of its named protocols
(:mod:`envs.protocol`; e.g. WebShop's and ALFWorld's ``verl_agent``): it is passed to the env, and its train and
validation splits are the defaults (ALFWorld's ``verl_agent``: ``valid_seen`` and ``valid_unseen``). ``--val-split``
takes several splits, comma-separated.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import envs
from envs import protocol
from prover_verl.agent import AGENT_NAME


def task_rows(
    env_name: str, split: str, verify: bool, env_kwargs: dict[str, Any], limit: int | None = None
) -> list[dict]:
    """One dataset row per task of ``env_name``'s ``split``; prints how many there are and where they come from."""
    env = envs.make(env_name, split=split, **env_kwargs)
    print(f"{env_name} {split}: {len(env.task_ids())} tasks in {env.data_source() or 'the env'}")
    task_ids = env.task_ids()[:limit] if limit else env.task_ids()
    if not task_ids:
        raise ValueError(f"environment '{env_name}' has no tasks in split '{split}'")
    data_fingerprint = env.data_fingerprint()  # the agent loop checks it against each node's data
    rows = []
    for index, task_id in enumerate(task_ids):
        category = env.task_category(task_id)
        rows.append(
            {
                "data_source": f"{env_name}/{category}",
                "prompt": [{"role": "user", "content": f"{env_name} task {task_id}"}],
                "agent_name": AGENT_NAME,
                "reward_model": {"style": "env", "ground_truth": ""},
                "extra_info": {
                    "env": env_name,
                    "task_id": str(task_id),
                    "category": category,
                    "split": split,
                    "verify": verify,
                    "index": index,
                    **({"data_fingerprint": data_fingerprint} if data_fingerprint is not None else {}),
                },
            }
        )
    return rows


def protocol_splits(env_name: str, name: str | None) -> tuple[str, tuple[str, ...]]:
    """The train split and validation splits of ``env_name``'s protocol ``name`` (None: its default), the env
    spec's where the protocol sets none or the env has no protocols.

    Raises:
        ValueError: a name the env has no protocol of (the message lists the known ones).
    """
    chosen = protocol.selected(env_name, {"protocol": name})
    spec = envs.spec(env_name)
    train_split, val_splits = (None, ()) if chosen is None else (chosen.train_split, chosen.val_splits)
    return train_split or spec.train_split, val_splits or (spec.val_split,)


def write_dataset(
    env_name: str,
    out_dir: str | os.PathLike,
    train_split: str,
    val_split: str | Sequence[str],
    env_kwargs: dict[str, Any] | None = None,
    max_train: int | None = None,
    max_val: int | None = None,
) -> dict[str, Path]:
    """Write ``train.parquet`` (ProVer verifies these) and ``val.parquet`` (it never does) to ``out_dir``.

    ``val_split`` may name several splits (a sequence, or comma-separated): ``val.parquet`` lists the tasks of each
    (``max_val`` per split), every row naming its split.
    """
    import pandas as pd

    val_splits = val_split.split(",") if isinstance(val_split, str) else list(val_split)
    out = Path(out_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, splits, verify, limit in [("train", [train_split], True, max_train), ("val", val_splits, False, max_val)]:
        rows = [row for split in splits for row in task_rows(env_name, split, verify, env_kwargs or {}, limit)]
        paths[name] = out / f"{name}.parquet"
        pd.DataFrame(rows).to_parquet(paths[name])
        print(f"{env_name}: {len(rows)} {'+'.join(splits)} tasks -> {paths[name]}")
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", required=True, choices=envs.env_names())
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--train-split", default=None, help="default: the protocol's, else the spec's")
    parser.add_argument("--val-split", default=None, help="comma-separated; default: the protocol's, else the spec's")
    parser.add_argument("--env-kwargs", default="{}", help="JSON constructor arguments (e.g. data paths)")
    parser.add_argument("--protocol", default=None, help="a named protocol of the env (envs/<env>/protocol.py)")
    parser.add_argument("--max-train", type=int, default=None)
    parser.add_argument("--max-val", type=int, default=None)
    args = parser.parse_args(argv)
    env_kwargs = json.loads(args.env_kwargs)
    if args.protocol is not None:
        if env_kwargs.get("protocol", args.protocol) != args.protocol:
            parser.error(f"--protocol {args.protocol} but --env-kwargs names protocol {env_kwargs['protocol']!r}")
        env_kwargs["protocol"] = args.protocol
    # the protocol named either way sets the splits (the recipes' data commands pass it in ENV_KWARGS)
    train_split, val_splits = protocol_splits(args.env, env_kwargs.get("protocol"))
    write_dataset(
        args.env,
        args.out,
        args.train_split or train_split,
        args.val_split or val_splits,
        env_kwargs,
        args.max_train,
        args.max_val,
    )


if __name__ == "__main__":
    main()
