"""Checkpoint tensor names: Wisp's parameter names -> a safetensors checkpoint's, per naming family (a family's
GGUF names: its GgufFormat and engine.gguf.tensor_map)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class MoeWeightNames:
    block: str  # submodule of a decoder layer holding router and experts
    router: str
    gate: str  # per-expert projections, relative to "{block}.experts.{e}."
    up: str
    down: str

    def checkpoint_name(self, param: str) -> str:
        """A parameter of engine.model.transformer.MoeTransformer -> the checkpoint's tensor name: under "model.",
        the MoE block and its router as the family names them, the shared experts directly in the block."""
        if param.startswith("lm_head"):
            return param
        param = param.replace(".mlp.shared.", ".mlp.").replace(".mlp.gate.", f".{self.block}.{self.router}.")
        return "model." + param

    def router_weight(self, layer: int) -> str:
        return f"model.layers.{layer}.{self.block}.{self.router}.weight"

    def expert_weight(self, layer: int, expert: int, projection: str) -> str:
        return f"model.layers.{layer}.{self.block}.experts.{expert}.{projection}.weight"

    def fused_weight(self, layer: int, name: str) -> str:
        """Recent transformers may store experts stacked: experts.gate_up_proj [E, 2I, D], experts.down_proj [E, D, I]."""
        return f"model.layers.{layer}.{self.block}.experts.{name}"


QWEN_STYLE = MoeWeightNames(block="mlp", router="gate", gate="gate_proj", up="up_proj", down="down_proj")
MIXTRAL_STYLE = MoeWeightNames(block="block_sparse_moe", router="gate", gate="w1", up="w3", down="w2")
