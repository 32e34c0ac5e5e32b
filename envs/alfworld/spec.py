"""ALFWorld's :class:`~envs.spec.EnvSpec` (imports nothing heavy: the env class loads on first use)."""

from envs.alfworld.games import TASK_TYPES
from envs.spec import EnvSpec, TableSpec

# The result table's column per task type (the paper's short names), in TASK_TYPES order.
TASK_COLUMNS = dict(zip(TASK_TYPES, ("pick", "look", "clean", "heat", "cool", "pick2"), strict=True))

SPEC = EnvSpec(
    name="alfworld",
    target="envs.alfworld.env:AlfWorldEnv",
    train_split="train",
    val_split="valid_unseen",
    system_prompt=(
        "You are an agent in a text-based household environment (ALFWorld). Each turn you see what happened and "
        "the admissible actions. Think briefly, then reply with exactly one action inside <action></action>, "
        "copied from the admissible actions."
    ),
    tagged_action=True,
    # success rate (%) per task type and over all tasks
    table=TableSpec(
        headline="all",
        per_category="won",
        categories=tuple(TASK_COLUMNS.values()),
        category_names=TASK_COLUMNS,
        totals={"all": "won"},
        # verl-agent validates on valid_seen by default (its published ALFWorld numbers) and on valid_unseen too
        split_names={"valid_seen": "in-distribution", "valid_unseen": "out-of-distribution"},
    ),
)
