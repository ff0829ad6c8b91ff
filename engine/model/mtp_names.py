"""Where a checkpoint keeps its multi-token-prediction (draft) layer, in the two published layouts. A family names
its layout (engine.model.families: Family.draft_layer); engine.model.mtp builds the layer and reads it.

mtp (Qwen3-Next, Qwen3.5/3.6): `mtp.pre_fc_norm_embedding`, `mtp.pre_fc_norm_hidden`, `mtp.fc` over the
concatenation [embedding | hidden], one full-attention decoder layer under `mtp.layers.0.`, `mtp.norm`; the
embedding and lm_head are the model's.
nextn (DeepSeek-V3, GLM-4.5/4.6): the layer at index num_hidden_layers, `model.layers.{N}.`: enorm, hnorm,
eh_proj over [embedding | hidden], the decoder layer's own tensors, shared_head.norm and shared_head.head (the
model's lm_head where the file leaves it out); the embedding is the model's.
The layer itself is a MoE decoder layer with full attention at index num_hidden_layers (draft_layer_args)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.model.args import ModelArgs


@dataclass(frozen=True)
class DraftLayerNames:
    style: str  # "mtp" | "nextn"

    def layer_prefix(self, num_hidden_layers: int) -> str:
        """The checkpoint prefix of the draft layer's decoder-layer tensors (attention, norms, MoE)."""
        return "mtp.layers.0." if self.style == "mtp" else f"model.layers.{num_hidden_layers}."

    def input_names(self, num_hidden_layers: int) -> dict[str, str]:
        """Wisp's parameter (engine.model.mtp) -> the checkpoint's tensor, for the parts outside the decoder layer."""
        if self.style == "mtp":
            return {"embed_norm.weight": "mtp.pre_fc_norm_embedding.weight",
                    "hidden_norm.weight": "mtp.pre_fc_norm_hidden.weight",
                    "proj.weight": "mtp.fc.weight", "norm.weight": "mtp.norm.weight"}
        prefix = self.layer_prefix(num_hidden_layers)
        return {"embed_norm.weight": prefix + "enorm.weight", "hidden_norm.weight": prefix + "hnorm.weight",
                "proj.weight": prefix + "eh_proj.weight", "norm.weight": prefix + "shared_head.norm.weight"}

    def head_name(self, num_hidden_layers: int) -> str | None:
        """The draft layer's own output head, where the layout has one."""
        return self.layer_prefix(num_hidden_layers) + "shared_head.head.weight" if self.style == "nextn" else None

    def marker(self, num_hidden_layers: int) -> str:
        """A tensor every checkpoint that carries the draft layer holds."""
        return self.input_names(num_hidden_layers)["proj.weight"]


MTP = DraftLayerNames("mtp")
NEXTN = DraftLayerNames("nextn")


def draft_layer_args(args: ModelArgs) -> ModelArgs:
    """The model's args with the draft layer appended at index num_hidden_layers: a MoE layer with full attention,
    whose attention reads the KV pool add_draft_pool appends (the next index among the KV layers)."""
    layer_types = args.layer_types + ("full_attention",) if args.layer_types else ()
    return replace(args, num_hidden_layers=args.num_hidden_layers + 1, moe_layers=args.moe_layers + (True,),
                   layer_types=layer_types)
