"""The recipes resolve to a valid verl config on CPU, and GRPO differs from ProVer by the estimator alone."""

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import write_val_data

ROOT = Path(__file__).resolve().parents[2]
# flash-attn is a GPU package: CPU dry runs choose an attention implementation that needs none
SDPA = "+actor_rollout_ref.model.override_config.attn_implementation=sdpa"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """A train set as large as the largest recipe batch (the size check at start reads it)."""
    import pandas as pd

    path = tmp_path_factory.mktemp("data")
    pd.DataFrame({"extra_info": [{"task_id": str(i)} for i in range(64)]}).to_parquet(path / "train.parquet")
    return path


def run_recipe(recipe: str, cwd: Path, *args: str, **variables: str) -> subprocess.CompletedProcess:
    """``bash recipes/<recipe> args`` with the environment ``variables`` (MODEL_PATH defaults to a fake path)."""
    return subprocess.run(
        ["bash", str(ROOT / "recipes" / recipe), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "MODEL_PATH": "/models/qwen", **variables},
        timeout=300,
        cwd=cwd,  # hydra writes its outputs/ folder here
    )


def dry_run(recipe: str, cwd: Path, data_dir: Path, *overrides: str, **variables: str) -> dict:
    out = run_recipe(recipe, cwd, "--dry-run", SDPA, *overrides, DATA_DIR=str(data_dir), **variables)
    assert out.returncode == 0, out.stderr[-3000:]
    return yaml.safe_load(out.stdout)


def flatten(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from flatten(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def test_prover_and_grpo_recipes_differ_only_in_the_estimator(tmp_path, data_dir):
    prover = dict(flatten(dry_run("alfworld/run_prover_qwen3.5_2b.sh", tmp_path, data_dir)))
    grpo = dict(flatten(dry_run("alfworld/run_grpo_qwen3.5_2b.sh", tmp_path, data_dir)))
    assert prover["algorithm.adv_estimator"] == "prover" and grpo["algorithm.adv_estimator"] == "grpo"
    assert prover["trainer.v1.trainer_mode"] == "prover_sync"
    # a recipe says only what takes effect: no micro batch sizes beside dynamic batch size, and vLLM's context is
    # the episode's, not the model's 262,144-token maximum
    assert prover["actor_rollout_ref.actor.use_dynamic_bsz"] is True
    micro = [k for k, v in prover.items() if k.endswith("micro_batch_size_per_gpu") and v is not None]
    assert micro == [], micro
    assert prover["actor_rollout_ref.rollout.max_model_len"] == 2048 + 8192
    assert prover["actor_rollout_ref.rollout.agent.num_workers"] == 8 and prover["env.pool_workers"] == 4
    assert prover["actor_rollout_ref.rollout.agent.default_agent_loop"] == "prover_env_agent"
    assert prover["algorithm.prover.k"] == 2 and prover["env.name"] == "alfworld"
    # a key of verl's own config (no "+"): failed groups with no rows are refilled, for both methods alike
    assert prover["trainer.v1.sampler.sync_refill_failed_groups"] is True
    # micro batches by a token budget that holds the longest sequence, for the actor and both log-prob passes
    longest = prover["data.max_prompt_length"] + prover["data.max_response_length"]
    for prefix in ("actor_rollout_ref.rollout.log_prob", "actor_rollout_ref.ref.log_prob"):
        assert prover[f"{prefix}_use_dynamic_bsz"] is True
        assert prover[f"{prefix}_max_token_len_per_gpu"] == prover["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"]
    assert prover["actor_rollout_ref.actor.use_dynamic_bsz"] is True
    assert prover["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"] >= longest
    assert prover["data.train_files"] == f"{data_dir}/train.parquet"
    differing = {k for k in prover.keys() | grpo.keys() if prover.get(k) != grpo.get(k)}
    # the experiment name (and the checkpoint dir and paths derived from it) follow the estimator
    assert {k for k in differing if "experiment" not in k and "local_dir" not in k and "dir" not in k} == {
        "algorithm.adv_estimator"
    }


def test_bad_prover_key_fails_the_dry_run(tmp_path):
    out = run_recipe("searchqa/run_prover_qwen3.5_4b.sh", tmp_path, "--dry-run", "algorithm.prover.k=0")
    assert out.returncode != 0 and "algorithm.prover.k must be an integer >= 1" in out.stderr


@pytest.mark.skipif(importlib.util.find_spec("flash_attn") is not None, reason="flash-attn is installed here")
def test_dry_run_fails_when_the_attention_implementation_is_not_installed(tmp_path):
    out = run_recipe("alfworld/run_grpo_qwen3.5_2b.sh", tmp_path, "--dry-run", DATA_DIR="/data/x")
    assert out.returncode != 0 and "attn_implementation=flash_attention_2 (verl's default)" in out.stderr
    assert "pip install flash-attn==" in out.stderr


def test_env_kwargs_json_reaches_the_env_config(tmp_path, data_dir):
    text = '{"data_dir": "/data/web shop", "num_products": 100, "human_goals": true}'
    config = dry_run("webshop/run_prover_qwen3.5_2b.sh", tmp_path, data_dir, ENV_KWARGS=text)
    expected = {"data_dir": "/data/web shop", "num_products": 100, "human_goals": True, "protocol": "default"}
    assert config["env"]["kwargs"] == expected  # the recipe names its protocol
    assert dry_run("webshop/run_grpo_qwen3.5_2b.sh", tmp_path, data_dir)["env"]["kwargs"] == {"protocol": "default"}


@pytest.mark.slow
def test_recipes_name_their_protocol_and_it_can_be_chosen(tmp_path, data_dir):
    config = dry_run("alfworld/run_grpo_qwen3.5_2b.sh", tmp_path, data_dir, PROTOCOL="verl_agent")
    assert config["env"]["kwargs"] == {"protocol": "verl_agent"}
    out = run_recipe(
        "webshop/run_grpo_qwen3.5_2b.sh", tmp_path, "--dry-run", PROTOCOL="verl_agent", ENV_KWARGS='{"protocol": "x"}'
    )
    assert out.returncode != 0 and "ENV_KWARGS protocol='x' and PROTOCOL='verl_agent' disagree" in out.stderr


def test_eval_recipe_resolves_greedy_validation_of_each_checkpoint(tmp_path):
    ckpts = [tmp_path / "grpo" / "global_step_150", tmp_path / "prover" / "global_step_150"]
    for ckpt in ckpts:
        ckpt.mkdir(parents=True)
    # a name that is not hydra grammar unquoted (spaces, brackets): a learning-benchmark method's
    prover = "ProVer (oracle 1.0)/2B/seed1"
    args = ["alfworld", f"GRPO={ckpts[0]}/", "--dry-run", f"{prover}={ckpts[1]}", "--", SDPA]
    out = run_recipe("eval/run_eval.sh", tmp_path, *args, DATA_DIR="/data/x", OUT="eval_out")
    assert out.returncode == 0, out.stderr[-3000:]
    # one resolved config per checkpoint, printed one after the other (YAML folds a long value: unfolded here)
    words = " ".join(out.stdout.split()) + " "
    for name, ckpt in zip(("GRPO", prover), ckpts, strict=True):
        assert f"resume_from_path: {ckpt} " in words  # the trailing slash is gone
        assert f"eval_log_dir: {tmp_path / 'eval_out' / 'logs' / name} " in words  # absolute
    assert "experiment_name: eval_alfworld_ProVer__oracle_1.0__2B_seed1\n" in out.stdout
    assert out.stdout.count("attn_implementation: sdpa") == 2  # the overrides after -- reach every run
    assert out.stdout.count("val_only: true") == 2 and out.stdout.count("adv_estimator: grpo") == 2
    assert not (tmp_path / "eval_out" / "tables.md").exists()


def test_eval_recipe_tables_hold_the_runs_of_every_call(tmp_path, stub_verl_path):
    """On CPU each checkpoint needs a call of its own (its SMOKE_DIR): the second call's tables.md keeps the first
    call's run (verl stubbed: GRPO loses its episode, ProVer wins it)."""
    (tmp_path / "ckpt" / "global_step_1").mkdir(parents=True)
    (tmp_path / "data").mkdir()
    write_val_data(tmp_path / "data" / "val.parquet")
    path = {"PATH": stub_verl_path, "DATA_DIR": str(tmp_path / "data"), "OUT": "eval_out"}
    for spec in ("GRPO=ckpt/global_step_1", "ProVer (oracle 1.0)=ckpt/global_step_1"):
        out = run_recipe("eval/run_eval.sh", tmp_path, "keydoor", spec, **path)
        assert out.returncode == 0, out.stderr[-3000:]
    md = (tmp_path / "eval_out" / "tables.md").read_text()
    assert "| GRPO | 0.0 |\n| ProVer (oracle 1.0) | 100.0 |\n" in md
    assert "### relative gain over the baseline (%)" in md  # GRPO, logged by the first call, is the baseline


def test_eval_recipe_on_cpu_evaluates_the_smoke_checkpoint_with_the_hf_replica(tmp_path):
    """``run_eval.sh --cpu-smoke``: the paper-table path at CPU scale (docs/reproduce.md's worked example), on the
    training run's tiny model, with the validation set given after ``--``."""
    ckpt = tmp_path / "smoke" / "checkpoints" / "global_step_4"
    ckpt.mkdir(parents=True)
    args = ["searchqa", "--cpu-smoke", f"GRPO={ckpt}", "--dry-run", "--", "data.val_files=/data/val.parquet"]
    smoke = {"SMOKE_DIR": str(tmp_path / "smoke"), "SMOKE_IMITATE": "0", "OUT": "eval_out"}
    out = run_recipe("eval/run_eval.sh", tmp_path, *args, **smoke)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "device: cpu\n" in out.stdout and "name: hf\n" in out.stdout
    assert f"path: {tmp_path / 'smoke' / 'model'}\n" in out.stdout  # the training run's model, not a fresh one
    assert f"resume_from_path: {ckpt}\n" in out.stdout and "val_only: true" in out.stdout
    assert "val_before_train: true" in out.stdout  # the eval's override wins over the smoke's false
    assert "val_files: /data/val.parquet" in out.stdout


def shipped_data_env() -> dict:
    """This process's environment without ALFWORLD_DATA (which selects the official data, and which the alfworld
    package sets in the process that imports it)."""
    return {k: v for k, v in os.environ.items() if k != "ALFWORLD_DATA"}


def test_readme_alfworld_quick_start_passes_the_checks_with_the_shipped_data(tmp_path):
    block = (ROOT / "README.md").read_text().split("## Training with verl")[1].split("```bash\n")[1].split("```")[0]
    lines = [line.split("  #")[0] for line in block.splitlines()]
    data, export, check = lines[0], lines[1], lines[2]
    assert "prover_verl.data --env alfworld" in data and check.strip().endswith("--dry-run")
    (tmp_path / "recipes").symlink_to(ROOT / "recipes")  # the quick start runs from the repository root
    script = f"set -e; {data}; {export}; {check} {SDPA if importlib.util.find_spec('flash_attn') is None else ''}"
    out = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        env={**shipped_data_env(), "HOME": str(tmp_path)},  # the quick start writes and reads ~/data/prover/alfworld
        timeout=300,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "alfworld: 12 train tasks" in out.stdout  # the shipped set
    config = yaml.safe_load(out.stdout.split("\n", 2)[2])  # after the two lines prover_verl.data prints
    assert config["data"]["train_batch_size"] <= 12
    assert config["data"]["train_files"] == f"{tmp_path}/data/prover/alfworld/train.parquet"
    # 12 tasks at batch 8 is 1 step an epoch: verl's 30 epochs would stop the 150 steps at step 30 (issue F2)
    assert config["trainer"]["total_training_steps"] == 150 and config["trainer"]["total_epochs"] == 150
    assert "trainer.total_epochs raised from 30 to 150" in out.stderr


def test_recipe_batch_larger_than_the_shipped_alfworld_set_fails_naming_the_sizes(tmp_path):
    subprocess.run(
        ["python3", "-m", "prover_verl.data", "--env", "alfworld", "--out", str(tmp_path / "d")],
        check=True,
        capture_output=True,
        timeout=300,
        env=shipped_data_env(),
    )
    out = run_recipe("alfworld/run_grpo_qwen3.5_2b.sh", tmp_path, "--dry-run", SDPA, DATA_DIR=str(tmp_path / "d"))
    assert out.returncode != 0
    assert "hold 12 rows, fewer than one batch (data.train_batch_size=16)" in out.stderr


ENVS, SIZES = ("alfworld", "webshop", "searchqa"), ("2b", "4b")
BASELINES = {"gigpo": "gigpo", "rloo": "rloo", "ppo": "gae"}  # recipe method -> verl estimator


def test_every_baseline_recipe_is_the_grpo_recipe_but_its_estimator():
    for env in ENVS:
        for size in SIZES:
            grpo = (ROOT / f"recipes/{env}/run_grpo_qwen3.5_{size}.sh").read_text().splitlines()
            for method, estimator in BASELINES.items():
                recipe = (ROOT / f"recipes/{env}/run_{method}_qwen3.5_{size}.sh").read_text().splitlines()
                # line 2 is the comment naming the method; the command differs by ESTIMATOR alone
                assert [recipe[0], *recipe[2:]] == [
                    grpo[0],
                    *(line.replace("ESTIMATOR=grpo", f"ESTIMATOR={estimator}") for line in grpo[2:]),
                ]


def tiny_model(path: Path, tokenizer) -> Path:
    """A local model directory verl's critic config can load (config and tokenizer, no weights)."""
    from transformers import Qwen2Config

    tokenizer.save_pretrained(path)
    Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        architectures=["Qwen2ForCausalLM"],
    ).save_pretrained(path)
    return path


def dry_runs(
    cwd: Path, data_dir: Path, runs: list[tuple[str, tuple[str, ...]]], **variables: str
) -> list[subprocess.CompletedProcess]:
    """Several recipe dry runs at once (each is mostly verl's import time)."""
    env = {**os.environ, "MODEL_PATH": "/models/qwen", "DATA_DIR": str(data_dir), **variables}
    procs = [
        subprocess.Popen(
            ["bash", str(ROOT / "recipes" / recipe), "--dry-run", SDPA, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
        )
        for recipe, args in runs
    ]
    results = []
    for proc, (recipe, args) in zip(procs, runs, strict=True):
        out, err = proc.communicate(timeout=600)
        results.append(subprocess.CompletedProcess([recipe, *args], proc.returncode, out, err))
    return results


def test_baselines_and_ablations_resolve_and_differ_from_grpo_only_where_they_must(tmp_path, data_dir, tokenizer):
    model = str(tiny_model(tmp_path / "model", tokenizer))  # the PPO critic's config loads the model's files
    runs = [
        ("alfworld/run_grpo_qwen3.5_2b.sh", ()),
        ("alfworld/run_gigpo_qwen3.5_2b.sh", ()),
        ("alfworld/run_rloo_qwen3.5_2b.sh", ()),
        ("alfworld/run_ppo_qwen3.5_2b.sh", ()),
        ("alfworld/run_prover_qwen3.5_2b.sh", ("--judge-only=0.5", "--k=4", "--coef=1.0")),
    ]
    results = dry_runs(tmp_path, data_dir, runs, MODEL_PATH=model)
    for result in results:
        assert result.returncode == 0, (result.args, result.stderr[-3000:])
    grpo, gigpo, rloo, ppo, judge_only = (dict(flatten(yaml.safe_load(r.stdout))) for r in results)

    def differing(config):
        keys = {k for k in config.keys() | grpo.keys() if config.get(k) != grpo.get(k)}
        return {k for k in keys if "experiment" not in k and "dir" not in k}

    assert differing(gigpo) == differing(rloo) == {"algorithm.adv_estimator"}
    assert (gigpo["algorithm.adv_estimator"], rloo["algorithm.adv_estimator"]) == ("gigpo", "rloo")
    assert gigpo["algorithm.gigpo.gamma"] == 0.95 and gigpo["trainer.v1.trainer_mode"] == "prover_sync"
    ppo_keys = differing(ppo)
    assert ppo["algorithm.adv_estimator"] == "gae" and ppo["critic.model.path"] == model
    assert {k for k in ppo_keys if not k.startswith("critic.")} == {"algorithm.adv_estimator"}
    assert {"critic.model.path", "critic.ppo_max_token_len_per_gpu"} <= ppo_keys
    assert ppo["algorithm.gamma"] == ppo["algorithm.lam"] == 1.0

    assert differing(judge_only) == {
        "algorithm.adv_estimator",
        "algorithm.prover.ablation",
        "algorithm.prover.judge_only_estimate",
        "algorithm.prover.k",
        "algorithm.prover.coef",
    }
    assert (judge_only["algorithm.prover.ablation"], judge_only["algorithm.prover.judge_only_estimate"]) == (
        "judge_only",
        0.5,
    )
    assert (judge_only["algorithm.prover.k"], judge_only["algorithm.prover.coef"]) == (4, 1.0)
    # an ablation's run gets its own name and checkpoints, not the main ProVer run's
    assert judge_only["trainer.experiment_name"] == "alfworld_prover_qwen3.5_2b_judgeonly0.5_k4_coef1.0"
    assert judge_only["trainer.default_local_dir"].endswith("alfworld_prover_qwen3.5_2b_judgeonly0.5_k4_coef1.0")


def method_args(estimator: str, *args: str) -> subprocess.CompletedProcess:
    """What recipes/methods.sh makes of the recipe flags ``args`` (bash only, no verl)."""
    script = (
        'EXTRA=("$@"); ENV_NAME=alfworld MODEL_SIZE=2B PROJECT=p MODEL_PATH=/m TOKENS_PER_GPU=16384; '
        f"ESTIMATOR={estimator}; EXPERIMENT=alfworld_{estimator}_qwen3.5_2b; CKPT_DIR=checkpoints/p/$EXPERIMENT; "
        f'source {ROOT / "recipes/methods.sh"}; printf "%s\\n" "$EXPERIMENT" "${{EXTRA[@]}}"'
    )
    return subprocess.run(["bash", "-c", script, "-", *args], capture_output=True, text=True, timeout=30)


def test_each_ablation_flag_sets_its_config_key():
    for flags, expected in [
        (["--judge-only"], ["algorithm.prover.ablation=judge_only"]),
        (["--random-segment"], ["algorithm.prover.ablation=random_segment"]),
        (["--every-turn", "trainer.x=1"], ["algorithm.prover.ablation=every_turn", "trainer.x=1"]),
        (["--k=8", "--coef=0.5"], ["algorithm.prover.k=8", "algorithm.prover.coef=0.5"]),
    ]:
        out = method_args("prover", *flags)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[1:] == expected and lines[0].startswith("alfworld_prover_qwen3.5_2b_")
    assert method_args("prover").stdout.splitlines() == ["alfworld_prover_qwen3.5_2b"]  # untagged main run
    wrong = method_args("grpo", "--every-turn")
    assert wrong.returncode == 2 and "ablation flags need the ProVer recipe" in wrong.stderr
    typo = method_args("prover", "--judgeonly")
    assert typo.returncode == 2 and "unknown recipe flag --judgeonly" in typo.stderr


def test_search_qa_recipes_name_their_protocol(tmp_path, data_dir):
    # Search-R1's published setting: its prompt, parsing and observations, 4 searching turns and one to answer
    config = dry_run("searchqa/run_grpo_qwen3.5_2b.sh", tmp_path, data_dir)
    assert config["env"]["kwargs"] == {"protocol": "search_r1"} and config["env"]["max_turns"] == 5
    out = run_recipe("searchqa/run_grpo_qwen3.5_2b.sh", tmp_path, "--dry-run", ENV_KWARGS='{"protocol": "default"}')
    assert out.returncode != 0 and "ENV_KWARGS protocol='default' and PROTOCOL='search_r1' disagree" in out.stderr
