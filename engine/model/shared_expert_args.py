"""The experts every token goes through besides the routed ones (engine.model.shared_experts)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SharedExpertArgs:
    shared_expert_intermediate_size: int = 0  # > 0: one expert behind a sigmoid gate (qwen2_moe, the hybrids)
    n_shared_experts: int = 0  # > 0: ungated experts, one MLP of n_shared_experts * moe_intermediate_size (DeepSeek)

    def intermediate_size(self, moe_intermediate_size: int) -> int:
        """Rows of the shared MLP, whichever kind."""
        return self.shared_expert_intermediate_size + self.n_shared_experts * moe_intermediate_size

