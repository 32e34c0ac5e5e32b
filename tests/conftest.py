"""Shared test fixtures: a tiny locally trained tokenizer, a scripted rollout server, a toy env, a stub of verl's
program for the recipes and the CPU smoke's cache of tiny models (all CPU)."""

import asyncio
import collections
import json
import os
import re
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

import envs
from envs.base import EnvState, TextEnv

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


class ForkRoadEnv(TextEnv):
    """Turn 0 decides: 'go right' leads to the treasure, 'go left' to a dead end; then 'wait', then 'open'.

    Success iff the path is right, wait, open. Any other action is an invalid step with feedback.
    """

    name = "forkroad"

    def __init__(self, max_steps: int = 6):
        super().__init__(max_steps)
        self._path: list[str] = []

    def task_ids(self):
        return ["road-0"]

    def _obs(self):
        n = len(self._path)
        if n == 0:
            return "You stand at a fork. Choose: go left or go right."
        if n == 1:
            return f"You went {self._path[0].split()[-1]}. You may wait."
        return "A chest is in front of you. You may open it."

    def _info(self, won=False):
        return {"won": won, "admissible_actions": None, "task": "find the treasure", "step": len(self._path)}

    def reset(self, *, seed=None, options=None):
        self._path = []
        return self._obs(), self._info()

    def step(self, action):
        expected = {0: ("go left", "go right"), 1: ("wait",), 2: ("open",)}[min(len(self._path), 2)]
        if action not in expected:
            self._path.append("invalid")
            truncated = len(self._path) >= self.max_steps
            return "Nothing happens.", 0.0, False, truncated, self._info()
        self._path.append(action)
        if action == "open":
            won = self._path[0] == "go right" and "invalid" not in self._path
            return "The chest opens." if won else "It is empty.", float(won), True, False, self._info(won)
        return self._obs(), 0.0, False, False, self._info()

    def snapshot(self):
        return EnvState(self.name, "road-0", len(self._path), tuple(self._path))

    def restore(self, state):
        self._check_state(state)
        self._path = list(state.payload)
        return self._obs(), self._info()


envs.register_env(
    "forkroad", ForkRoadEnv, system_prompt="Find the treasure. Reply with one action inside <action></action>."
)


class PivotRoadEnv(ForkRoadEnv):
    """The fork road whose info names its pivotal turn (the fork, turn 0), as an env that knows its pivot does."""

    name = "pivotroad"

    def _info(self, won=False):
        return {**super()._info(won), "pivot_turn": 0}


envs.register_env("pivotroad", PivotRoadEnv, system_prompt=envs.spec("forkroad").system_prompt)


@pytest.fixture(scope="session")
def tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    special = ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|pad|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(["<action>go left</action> go right wait open the chest trajectory turn"] * 4, trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|end|>", pad_token="<|pad|>")
    hf.chat_template = CHAT_TEMPLATE
    return hf


class ScriptedServer:
    """Stands in for verl's LLMServerClient: decodes the prompt and answers from a script.

    At the fork the answer alternates right/left per distinct prompt, so n identical prompts get exactly half
    successes whatever the scheduling order. A judge prompt gets a JSON answer naming turn 0 of the success.
    """

    def __init__(self, tokenizer, always_right: bool = False):
        self.tokenizer = tokenizer
        self.always_right = always_right
        self.calls = collections.Counter()
        self.judge_prompts = []
        self.generations = 0
        self.version = 1  # an int, or a callable giving the version of each generation
        self.requests = []  # (request_id, prompt length, sampling params) of every generate call
        self.reply_lengths = []  # tokens returned by every generate call

    def _reply(self, text: str, key) -> str:
        if "You analyse two attempts" in text:
            self.judge_prompts.append(text)
            label = "A" if "Trajectory A (SUCCEEDED" in text else "B"
            return json.dumps({"trajectory": label, "start_turn": 0, "end_turn": 0, "reason": "the fork"})
        return self.act(text, key)

    def alternate(self, key) -> bool:
        """True, False, True, ... over the calls with the same prompt (unless ``always_right``)."""
        self.calls[key] += 1
        return self.always_right or self.calls[key] % 2 == 1

    def act(self, text: str, key) -> str:
        last = re.split(r"<\|user\|>", text)[-1]
        if "Choose: go left or go right" in last:
            return "<action>go right</action>" if self.alternate(key) else "<action>go left</action>"
        if "You may wait" in last:
            return "I will <action>wait</action>"
        return "<think>the chest</think><action>open</action>"

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        self.requests.append((request_id, len(prompt_ids), dict(sampling_params)))
        text = self.tokenizer.decode(prompt_ids)
        reply = self._reply(text, tuple(prompt_ids))
        self.generations += 1
        # as verl's LLMServerClient reports it: the policy version (global step) that generated this turn
        version = self.version() if callable(self.version) else self.version
        steps = {"global_steps": version, "min_global_steps": version, "max_global_steps": version}
        tokens = self.tokenizer.encode(reply) + [self.tokenizer.eos_token_id]
        if sampling_params.get("max_tokens") is not None:  # as vLLM: the reply stops at the cap
            tokens = tokens[: sampling_params["max_tokens"]]
        self.reply_lengths.append(len(tokens))
        return TokenOutput(token_ids=tokens, extra_fields=steps)


class PlanServer(ScriptedServer):
    """Follows an expert plan, except that its first action alternates between the plan's and a wasted "look"."""

    def __init__(self, tokenizer, plan: list[str]):
        super().__init__(tokenizer)
        self.plan = plan

    def act(self, text: str, key) -> str:
        turn = text.count("<|assistant|>") - 1  # one generation prompt per turn so far, plus this one
        if turn == 0 and not self.alternate(key):
            return "<action>look</action>"
        return f"<action>{self.plan[min(turn, len(self.plan) - 1)]}</action>"


def make_config(
    adv_estimator="prover",
    n=4,
    k=4,
    coef=1.0,
    judge="policy",
    response_length=512,
    prompt_length=256,
    env=None,
    **prover,
):
    return OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": prompt_length,
                    "response_length": response_length,
                    "n": n,
                    "calculate_log_probs": False,
                }
            },
            "data": {"apply_chat_template_kwargs": {}},
            "algorithm": {
                "adv_estimator": adv_estimator,
                "norm_adv_by_std_in_grpo": True,
                "prover": {"k": k, "coef": coef, "judge": {"type": judge}, **prover},
            },
            "env": env or {"name": "forkroad", "max_turns": 6},
        }
    )


@pytest.fixture
def make_loop(tokenizer):
    from prover_verl.agent.env_agent_loop import EnvAgentLoop

    def build(config, server):
        return EnvAgentLoop(
            trainer_config=DictConfigWrap(config),
            server_manager=server,
            tokenizer=tokenizer,
            processor=None,
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(config.data),
        )

    return build


@pytest.fixture
def scripted_server(tokenizer):
    """Factory of :class:`ScriptedServer` on the test tokenizer."""
    return lambda **kwargs: ScriptedServer(tokenizer, **kwargs)


@pytest.fixture
def play_group(make_loop):
    """Plays one training group of the agent loop: ``await play_group(config, server, uid, ...)`` -> the outputs."""

    async def play(config, server, uid, env="forkroad", n=4, global_steps=1):
        loops = [make_loop(config, server) for _ in range(n)]
        extra = {"env": env, "task_id": "road-0", "verify": True}
        return await asyncio.gather(
            *(
                loop.run({"temperature": 1.0}, uid=uid, session_id=i, global_steps=global_steps, extra_info=extra)
                for i, loop in enumerate(loops)
            )
        )

    return play


@pytest.fixture(name="make_config")
def make_config_fixture():
    """Factory of a minimal verl config for the ProVer agent loop (see :func:`make_config`)."""
    return make_config


# verl's program (python3 -m prover_verl.main), stubbed for the evaluation recipes: one KeyDoor episode, won by the
# ProVer runs and the runs named .../seed1, logged where env.eval_log_dir points (hydra's quotes removed), and the
# arguments in args.txt
STUB_VERL = r"""#!/usr/bin/env bash
if [ "$1 $2" != "-m prover_verl.main" ]; then exec PYTHON "$@"; fi
for a in "$@"; do case "$a" in env.eval_log_dir=*) d=${a#*=}; d=${d//\'/} ;; esac; done
won=0.0; case "$d" in *ProVer*|*/seed1) won=1.0 ;; esac
mkdir -p "$d"; echo "{\"step\": 0, \"env\": \"keydoor\", \"won\": $won}" > "$d/episodes-1.jsonl"
printf '%s\n' "$@" > "$d/args.txt"
"""


@pytest.fixture
def stub_verl_path(tmp_path) -> str:
    """A ``PATH`` whose ``python3`` runs :data:`STUB_VERL` for verl's program and this interpreter otherwise."""
    stub = tmp_path / "stub_bin" / "python3"
    stub.parent.mkdir()
    stub.write_text(STUB_VERL.replace("PYTHON", sys.executable))
    stub.chmod(0o755)
    return f"{stub.parent}{os.pathsep}{os.environ['PATH']}"


@pytest.fixture(scope="session")
def smoke_asset_cache(request, tmp_path_factory) -> Path:
    """The folder where CPU smoke runs share the tiny models and data they build (``asset_cache`` of
    :func:`prover_verl.cpu.smoke.run_smoke`, keyed by every setting and source file that shapes a build): in
    pytest's cache, so that a rerun of unchanged code skips the minutes of imitation (``--cache-clear`` empties
    it), or, with ``-p no:cacheprovider``, a folder of this run only."""
    cache = getattr(request.config, "cache", None)
    return cache.mkdir("smoke_assets") if cache is not None else tmp_path_factory.mktemp("smoke_assets")
