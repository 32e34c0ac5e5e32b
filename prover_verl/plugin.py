"""Entry point of the ``verl.plugins`` group: verl imports it on ``import verl`` in every process.

It registers the ``cpu`` platform and the ``hf`` rollout (:mod:`prover_verl.cpu`), the ``prover`` and ``gigpo``
advantage estimators, the ``prover_sync`` v1 trainer mode and the ``prover_env_agent`` agent loop, so each exists
in whichever Ray process verl looks it up. verl swallows plugin import errors at debug level, so a failure is
logged here as a warning before it propagates; otherwise ``adv_estimator=prover`` would later fail with only
"Unknown advantage estimator".
"""

import logging

try:
    # The platform first: verl resolves its platform once per process, and the imports below already ask for it.
    # (a plain import, which import sorting keeps ahead of the from-imports)
    import prover_verl.cpu.register  # noqa: F401
    import prover_verl.rollout.register  # noqa: F401

    # Registration happens on import. The trainer and agent loop add ~1-2 s of imports per process, on top of
    # the ~6 s verl's core_algos already costs.
    from prover_verl import estimator, gigpo, trainer  # noqa: F401
    from prover_verl.agent import env_agent_loop  # noqa: F401
except Exception:  # pragma: no cover - exercised only by a broken install
    logging.getLogger(__name__).warning("prover_verl plugin failed to load", exc_info=True)
    raise
