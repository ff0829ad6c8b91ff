"""One launch configuration per fla Triton kernel of the gated delta rule's chunked form, {kernel name}.json in the
format of fla's config cache (fla.ops.utils.cache, FLA_CACHE_MODE=full): engine.model.delta_rule_fla points fla here
so that no kernel is autotuned. An entry under "autotune_entries" (as fla writes them) overrides the default for
its exact key."""
