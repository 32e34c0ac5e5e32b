"""verl on CPU: a ``cpu`` platform and a transformers rollout replica (``rollout.name=hf``), both registered
through verl's own registries by :mod:`prover_verl.plugin`, so verl's real trainer, agent loop and FSDP workers
run on a machine without a GPU (docs/cpu_loop.md)."""
