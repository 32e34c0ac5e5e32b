"""Developer tools of a source checkout (not installed with the package: setup.py ships prover_verl and envs only)."""
