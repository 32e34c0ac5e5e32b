"""verl on CPU: a ``cpu`` platform and a transformers rollout replica (``rollout.name=hf``), both registered
through verl's own registries by :mod:`prover_verl.plugin`, so verl's real trainer, agent loop and FSDP workers
run on a machine without a GPU (docs/cpu_loop.md)."""

# actor_rollout_ref.rollout.name of the transformers rollout (kept here, free of imports: the replica module is
# unpickled in Ray processes whose `import verl` loads the plugin, which must not import the replica module back)
ROLLOUT_NAME = "hf"
