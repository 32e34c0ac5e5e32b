"""CPU credit-assignment demo: GRPO vs ProVer vs exhaustive Monte-Carlo on KeyDoor, a toy multi-turn text env.

A learned MLP policy over observation features stands in for the LLM; the ProVer pieces (GRPO advantage, judge,
fork points, segment credit and its merge) are the project's own. ``python -m prover_verl.demo`` runs the default
comparison and writes a table, a JSON file and a plot.
"""
