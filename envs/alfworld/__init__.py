"""ALFWorld (text) on TextWorld's PDDL engine, with exact snapshot/restore.

``envs.alfworld.env.AlfWorldEnv`` plays the official ALFWorld games (``$ALFWORLD_DATA/json_2.1.1/<split>``) or,
by default, the small generated set shipped in ``envs/alfworld/data`` (written by ``tools/make_data/alfworld.py``
in a source checkout). The package itself imports nothing heavy: TextWorld and ALFWorld load with the env module.
"""
