"""ALFWorld (text) on TextWorld's PDDL engine, with exact snapshot/restore, and an offline game generator.

``envs.alfworld.env.AlfWorldEnv`` plays the official ALFWorld games (``$ALFWORLD_DATA/json_2.1.1/<split>``) or,
by default, the small generated set shipped in ``envs/alfworld/data``; ``envs.alfworld.generate`` writes such
games. The package itself imports nothing heavy: TextWorld and ALFWorld load with the env module.
"""
