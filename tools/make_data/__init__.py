"""Generators of the small data sets shipped in ``envs/<name>/data`` (one module per env, its seed literals in
``<name>_seed.json`` next to it). Run from the repository root, e.g. ``python -m tools.make_data.webshop``.

They are not part of the installed package: nothing under ``prover_verl`` or ``envs`` imports them.
"""
