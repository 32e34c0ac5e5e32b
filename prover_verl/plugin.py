"""Entry point of the ``verl.plugins`` group: verl imports it on ``import verl`` in every process.

It registers the ``prover`` advantage estimator. verl swallows plugin import errors at debug level, so a
failure is logged here as a warning before it propagates; otherwise ``adv_estimator=prover`` would later fail
with only "Unknown advantage estimator".
"""

import logging

try:
    from prover_verl import estimator  # noqa: F401  (registers the estimator)
except Exception:  # pragma: no cover - exercised only by a broken install
    logging.getLogger(__name__).warning("prover_verl plugin failed to load", exc_info=True)
    raise
