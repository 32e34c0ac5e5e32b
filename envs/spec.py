"""What the rest of the project needs to know about an environment family, declared once in the env's folder.

An :class:`EnvSpec` names the env class (as ``"module:Class"``, imported only where the env is played, so one
env's heavy dependencies load only in the processes that step it), the default train and validation splits, how
the LLM is prompted and how its reply becomes an action, and how validation episodes become a results table.
The registry in :mod:`envs` holds one spec per name; the data writer, the prompt adapters, the result tables and
the benchmarks all read it from there.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class TableSpec:
    """How logged validation episodes of one env become a table row (``prover_verl.eval.tables``).

    Every column is a percentage (a mean of 0/1 or [0, 1] values times 100).

    Attributes:
        headline: The column a run's relative gain over a baseline is computed on.
        per_category: Episode field averaged per task category (``won`` where an episode lacks it); None: no
            per-category columns.
        categories: The per-category columns, in this order (always present, ``None`` where no episode fell in
            one); empty: one column per category seen, sorted, and no others.
        category_names: Logged category -> column name (categories not listed keep their name).
        totals: Column -> episode field averaged over all episodes (e.g. ``{"all": "won"}``); ``"a|b"``: field
            ``a``, or ``b`` in an episode without ``a``.
        mean_column: A column holding the unweighted mean of the per-category columns.
        split_names: Validation split -> what it measures (e.g. ``valid_seen`` -> ``in-distribution``): episodes of
            these splits are tabulated apart. The benchmark's own row is the first listed split that was logged (the
            published number), and with two or more splits logged each also gets a row ``<env>_<split>``.
    """

    headline: str
    per_category: str | None = None
    categories: tuple[str, ...] = ()
    category_names: dict[str, str] = dataclasses.field(default_factory=dict)
    totals: dict[str, str] = dataclasses.field(default_factory=dict)
    mean_column: str | None = None
    split_names: dict[str, str] = dataclasses.field(default_factory=dict)

    def fixed_columns(self) -> list[str]:
        """The columns of a known position, in order: the listed categories, then the totals."""
        return [*self.categories, *self.totals]


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """One environment family.

    Attributes:
        name: The registry name (``envs.make(name)``); equal to the env class's ``name``.
        target: The env class, or ``"module:Class"`` to import on first use. Only the string form reaches
            other processes by name (a class is pickled by Ray with the spec).
        train_split: The split training rows are listed from (``prover_verl.data``).
        val_split: The split validation rows are listed from.
        system_prompt: The system prompt the LLM plays the env with.
        tagged_action: The action is the last ``<action>...</action>`` of the LLM's reply and the admissible
            actions are listed after each observation; else the whole reply (thoughts removed) goes to the env,
            which parses its own tags.
        table: How validation episodes are tabulated; None: the env has no results table.
    """

    name: str
    target: str | type
    train_split: str = "train"
    val_split: str = "test"
    system_prompt: str = ""
    tagged_action: bool = True
    table: TableSpec | None = None


__all__ = ["EnvSpec", "TableSpec"]
