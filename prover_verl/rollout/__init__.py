"""verl's rollout replicas as this project runs them: vLLM with an abort that reaches the engine
(:mod:`prover_verl.rollout.vllm_server`, registered as ``rollout.name=vllm`` by :mod:`prover_verl.plugin`)."""
