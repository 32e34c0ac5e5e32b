"""Training entry point: verl's ``main_ppo`` on the ProVer config (``python -m prover_verl.main``).

Same as ``python -m verl.trainer.main_ppo`` except for the config it starts from
(``prover_verl/conf/prover_trainer.yaml``: verl's ``ppo_trainer`` plus the ProVer keys), an early check of the
ProVer and env settings, and ``dry_run=true``, which prints the resolved config and exits before Ray starts.
"""

from __future__ import annotations

import contextlib
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from envs.protocol import selected as selected_protocol
from prover_verl.config import EnvConfig, GiGPOConfig, ProverConfig
from prover_verl.preflight import (
    check_attention,
    check_env_name,
    check_train_set,
    fit_epochs_to_steps,
    ignored_settings,
)


def check_config(config: DictConfig) -> None:
    """Fail fast, naming the key, on a bad ``algorithm.prover``, ``algorithm.gigpo`` or ``env`` section, an unknown
    estimator, an attention implementation whose package is not installed, or a train set smaller than one batch;
    raise ``trainer.total_epochs`` to what ``trainer.total_training_steps`` needs; warn of settings verl ignores.

    ``env.kwargs`` given as JSON text (how the recipes pass ``ENV_KWARGS``) is replaced by the parsed mapping,
    so every process and the dry run see the mapping.
    """
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    from verl.trainer.ppo.v1 import get_trainer_cls

    prover = ProverConfig.from_algorithm_config(config.algorithm)
    GiGPOConfig.from_algorithm_config(config.algorithm)
    if config.algorithm.adv_estimator == "prover" and prover.judge.type == "openai":
        from prover_verl.judge.llm import api_key

        api_key(prover.judge)  # the key variable must be set here, and forwarded to the Ray workers
    env = EnvConfig.from_mapping(config.get("env"))
    check_env_name(env.name)
    selected_protocol(env.name, env.kwargs)  # an unknown protocol fails here, naming the known ones
    if isinstance(config.get("env", {}).get("kwargs"), str):
        config.env.kwargs = env.kwargs
    get_adv_estimator_fn(config.algorithm.adv_estimator)
    get_trainer_cls(config.trainer.v1.trainer_mode)
    estimator = config.algorithm.adv_estimator
    if estimator in ("prover", "gigpo") and config.trainer.v1.trainer_mode != "prover_sync":
        raise ValueError(f"algorithm.adv_estimator={estimator} needs trainer.v1.trainer_mode=prover_sync")
    check_attention(config)
    check_train_set(config)
    # notices go to stderr: a dry run's stdout is the resolved config alone (hydra's log handler writes to stdout)
    fitted = fit_epochs_to_steps(config)
    if fitted:
        print(f"prover_verl: {fitted}", file=sys.stderr)
    for setting in ignored_settings(config):
        print(f"prover_verl: ignored by verl 0.9.1 here: {setting}", file=sys.stderr)


@hydra.main(config_path="conf", config_name="prover_trainer", version_base=None)
def main(config: DictConfig) -> None:
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    check_config(config)
    # verl's own batch-size / parallelism checks are arithmetic on the config: they run without GPUs too. Their
    # report goes to stderr so that a dry run's stdout is the resolved config alone (valid YAML).
    with contextlib.redirect_stdout(sys.stderr):
        validate_config(
            config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
        )
    if config.dry_run:
        print(OmegaConf.to_yaml(config, resolve=True))
        return
    from verl.trainer.main_ppo import TaskRunnerV1, run_ppo
    from verl.utils.device import auto_set_device

    auto_set_device(config)
    run_ppo(config, task_runner_class=TaskRunnerV1)


if __name__ == "__main__":
    main()
