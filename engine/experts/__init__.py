"""Experts: where expert bytes live and how a MoE layer-step reaches them (docs/design.md, "The working set and
the pager"). Each part imports only the parts after it (an import-linter contract):
providers/ (resident, static, paged, static-UVA; the factory that picks one) > pager/ (slots, host and device LRU
bookkeeping, copies, prefetch, host tiers, the link) > provider.py (the ExpertProvider contract) > formats/
(ExpertLayout, the store, the dense kernels) > routing/ (dispatch and combine, DeepSeek-style routers, routing
listeners) > counters.py (the traffic every provider counts)."""
