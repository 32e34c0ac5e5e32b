"""prover-verl: ProVer propose-and-verify credit assignment for agentic RL, as a verl extension.

Importing this package is cheap; verl integration lives in :mod:`prover_verl.plugin`, which verl loads through
its ``verl.plugins`` entry point in every process.
"""

__version__ = "0.1.0"
