"""Search-QA's :class:`~envs.spec.EnvSpec`."""

from envs.spec import EnvSpec, TableSpec

SPEC = EnvSpec(
    name="searchqa",
    target="envs.searchqa.env:SearchQAEnv",
    train_split="train",
    val_split="test",
    system_prompt=(
        "Answer the question. You may search a knowledge base as many times as you need: write "
        "<search>your query</search> and the results come back between <information> and </information>. When "
        "you know the answer, write <answer>a short answer</answer>. Think before each search or answer."
    ),
    # the env parses its own <search>/<answer> tags
    tagged_action=False,
    # exact match (%) per dataset and their unweighted mean
    table=TableSpec(headline="avg", per_category="em", mean_column="avg"),
)
