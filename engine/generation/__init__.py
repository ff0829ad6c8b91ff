"""Pieces every token generator shares, under both Wisp's runtime and the other backends: the core contract
that engine.api drives, sampling, streaming text, throughput, prompts, ModelInfo and PlanEvent."""
