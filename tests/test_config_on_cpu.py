"""ProVer and env settings: defaults, and bad values failing at start with the key named."""

import dataclasses
import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import prover_verl
from prover_verl.config import EnvConfig, GiGPOConfig, ProverConfig


def test_prover_defaults_are_the_documented_ones():
    config = ProverConfig.from_algorithm_config(OmegaConf.create({"adv_estimator": "prover"}))
    assert (config.k, config.coef, config.min_estimate, config.segment_side) == (2, 2.0, 0.0, "success")
    assert config.judge.type == "policy"
    assert (config.ablation, config.judge_only_estimate) == ("none", 1.0)
    assert config.log_dir is None  # the group log is off unless asked for


AGENTIC = {"type": "openai", "url": "http://judge:8000/v1", "model": "m", "mode": "agentic"}


def test_agentic_judge_config():
    judge = ProverConfig.from_mapping({"judge": {**AGENTIC, "max_calls": 4, "token_budget": 9000}}).judge
    assert (judge.mode, judge.max_calls, judge.token_budget) == ("agentic", 4, 9000)
    assert ProverConfig().judge.mode == "oneshot"


@pytest.mark.parametrize(
    "values,message",
    [
        ({"k": 1.5}, "algorithm.prover.k must be an integer >= 1"),
        ({"k": True}, "algorithm.prover.k must be an integer >= 1"),
        ({"coef": float("nan")}, "algorithm.prover.coef must be a number >= 0"),
        ({"min_estimate": 1.0}, r"algorithm.prover.min_estimate must be a number in \[0, 1\)"),
        ({"max_segments_per_step": 0}, "algorithm.prover.max_segments_per_step"),
        ({"judge": {"type": "openai"}}, "algorithm.prover.judge.url must be set"),
        ({"judge": {"type": "openai", "url": "http://j/v1"}}, "algorithm.prover.judge.model must be set"),
        ({"judge": {"max_retries": -1}}, "algorithm.prover.judge.max_retries must be an integer >= 0"),
        ({"judge": {"type": "gpt"}}, "algorithm.prover.judge.type must be one of"),
        ({"judge": {"max_prompt_chars": 500}}, "algorithm.prover.judge.max_prompt_chars must be null or an integer"),
        ({"ablation": "judge"}, "algorithm.prover.ablation must be one of"),
        ({"ablation": "judge_only", "judge_only_estimate": 0.0}, r"judge_only_estimate must be a number in \(0, 1\]"),
        ({"ablation": "judge_only", "judge_only_estimate": 1.5}, r"judge_only_estimate must be a number in \(0, 1\]"),
        ({"judge_only_estimate": 0.5}, "judge_only_estimate must be left at 1.0 unless ablation=judge_only"),
        ({"ablation": "judge_only", "judge_only_estimate": 0.5, "min_estimate": 0.5}, "above min_estimate"),
        ({"train_on_continuations": "yes"}, "algorithm.prover.train_on_continuations must be true or false"),
        ({"log_dir": ""}, "algorithm.prover.log_dir must be null or an absolute path"),
        ({"log_dir": "runs/log"}, "algorithm.prover.log_dir must be null or an absolute path"),
        ({"log_max_chars": 8}, "algorithm.prover.log_max_chars must be an integer >= 16"),
        ({"log_file_mb": 0}, "algorithm.prover.log_file_mb must be a number > 0"),
        ({"judge": {"mode": "agent"}}, r"algorithm.prover.judge.mode must be one of \('oneshot', 'agentic'\)"),
        ({"judge": {"mode": "agentic"}}, "judge.mode must be oneshot unless judge.type=openai"),
        ({"judge": {"mode": "agentic", "type": "heuristic"}}, "judge.mode must be oneshot unless judge.type=openai"),
        ({"judge": {**AGENTIC, "max_calls": 0}}, "algorithm.prover.judge.max_calls must be an integer >= 1"),
        ({"judge": {**AGENTIC, "token_budget": 100}}, "algorithm.prover.judge.token_budget must be an integer >= 1000"),
        ({"judge": {"max_calls": 4}}, "judge.max_calls must be left at 8 unless judge.mode=agentic"),
        ({"judge": {"token_budget": 9000}}, "judge.token_budget must be left at 32000 unless judge.mode=agentic"),
        ({"judge": {"agentic": {"max_calls": 4}}}, r"unknown key\(s\) algorithm.prover.judge.agentic"),
    ],
)
def test_bad_prover_values_name_the_key(values, message):
    with pytest.raises(ValueError, match=message):
        ProverConfig.from_mapping(values)


def test_env_config_kwargs_as_mapping_or_json_text():
    mapping = {"name": "webshop", "kwargs": {"data_dir": "/d", "num_products": 10}}
    assert EnvConfig.from_mapping(mapping).kwargs == {"data_dir": "/d", "num_products": 10}
    text = EnvConfig.from_mapping({"name": "webshop", "kwargs": '{"data_dir": "/d", "num_products": 10}'})
    assert text == EnvConfig.from_mapping(mapping)
    assert EnvConfig.from_mapping({"kwargs": ""}).kwargs == {}
    for bad in ('{"data_dir": ', "[1, 2]"):
        with pytest.raises(ValueError, match="env.kwargs must be a JSON object"):
            EnvConfig.from_mapping({"kwargs": bad})


def test_env_name_typo_fails_reading_the_config_naming_the_key_and_the_registered_envs():
    with pytest.raises(
        ValueError, match=r"env.name='alfwrold' is not a registered environment; registered: .*alfworld"
    ):
        EnvConfig.from_mapping({"name": "alfwrold"})
    for name in ("alfworld", "webshop", "searchqa", "keydoor"):
        assert EnvConfig.from_mapping({"name": name}).name == name


@pytest.mark.parametrize(
    "values,message",
    [
        ({"max_turns": 0}, "env.max_turns must be an integer >= 1"),
        ({"pool_workers": -1}, "env.pool_workers must be an integer >= 0"),
        ({"start_timeout_s": 0}, "env.start_timeout_s must be a number > 0"),
        ({"max_turn": 5}, "unknown key.*env.max_turn"),
    ],
)
def test_bad_env_values_name_the_key(values, message):
    with pytest.raises(ValueError, match=message):
        EnvConfig.from_mapping(values)


CONF = Path(prover_verl.__file__).parent / "conf" / "prover_trainer.yaml"


def _flat(values, prefix=""):
    out = {}
    for key, value in values.items():
        if isinstance(value, dict) and key != "kwargs":  # env.kwargs is a value (a mapping), not a section
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.mark.parametrize(
    "section,cls", [("algorithm.prover", ProverConfig), ("algorithm.gigpo", GiGPOConfig), ("env", EnvConfig)]
)
def test_the_trainer_yaml_states_every_default_of_its_config_class(section, cls):
    # the yaml restates the dataclass defaults (so that `--cfg job` and the recipes show them): a key added, removed
    # or changed on one side only fails here, in either direction
    yaml = OmegaConf.to_container(OmegaConf.select(OmegaConf.load(CONF), section), resolve=True)
    defaults = json.loads(json.dumps(dataclasses.asdict(cls())))  # enums as their values, as the yaml has them
    assert _flat(yaml) == _flat(defaults), section
    assert not hasattr(cls, "from_mapping") or cls.from_mapping(yaml) == cls()
