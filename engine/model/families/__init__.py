"""Model families: one module per architecture, and one registry for both model formats.

A family module (qwen3_moe.py is the plainest to copy) holds everything Wisp knows about one architecture and ends
with `FAMILY = Family(...)`; registry.py lists the FAMILY of every module. A Hugging Face config.json's
`model_type` and a GGUF file's `general.architecture` both resolve through that one list (registry.family,
registry.gguf_family).

What a Family provides (engine.model.families.family):
- model_type: config.json's "model_type".
- read_config(config: dict) -> ModelArgs: the config.json fields -> the normalised engine.model.args.ModelArgs, with
  model_type set; raise ModelFormatError naming a missing or bad field, UnsupportedModelError for a feature Wisp
  does not compute. engine.model.args.common_args reads the fields every family shares.
- weight_names: engine.model.weight_names.MoeWeightNames, the checkpoint's names of the MoE block (QWEN_STYLE,
  MIXTRAL_STYLE, or the family's own); its checkpoint_name(param) maps every Wisp parameter to the checkpoint's.
- examples, layers: the published models and the layers in a phrase (the architectures table, families.table);
  shapes: benchmark shape name -> a published config.json (engine.model.shapes).
- reads_quantization: True when read_config reads config.json's quantization_config (otherwise a quantized
  checkpoint is refused by name).
- gguf: a GgufFormat, or None when Wisp reads no GGUF file of the family:
  - arch: llama.cpp's general.architecture;
  - read_metadata(key: GgufKeys) -> ModelArgs: the `{arch}.*` keys and tensor shapes -> ModelArgs (gguf_keys.
    common_fields reads what most llama.cpp MoE files share; glm4_moe builds a config dict for read_config);
  - layer_modules: Wisp module -> GGUF tensor base, where the family's files differ from llama.cpp's shared names
    (engine.gguf.tensor_map); layer_params: the same for parameters that are no module's weight or bias;
  - rotary_permuted: q/k rows in llama.cpp's adjacent-pair RoPE order (Mixtral, as llama.cpp's "llama");
  - check_convertible(args): raise UnsupportedModelError where llama.cpp's graph fixes what the checkpoint sets
    otherwise (gguf_checks has the usual ones); write_metadata(writer, args): `{arch}.*` keys beyond the shared
    ones; module_order, expert_specs, file_args: how `wisp convert-gguf` writes the family's tensors (defaults:
    the shared table's order, stacked experts, the checkpoint's layout); trailing_layers: tensors past
    num_hidden_layers (multi-token prediction); joined: parameters the files store otherwise (mla_gguf's kv_b_proj,
    nemotron_h_gguf's A_log); global_params, f32_tensors, file_tensors, write_layer_keys: names, types, computed
    tensors and per-layer keys of its own; reads / refusal: which files of an architecture several families share
    the family reads.

Helpers several families share, beside the family files: deepseek_config (DeepSeek-style routing keys), mla_config
(multi-head latent attention keys), hybrid_config and hybrid_gguf (the linear-attention hybrids' config.json and GGUF
files), gguf_keys, gguf_checks and tensor_spec (convert-gguf's tensors).

The layers are shared blocks named for what they do, each variant an object built from a ModelArgs sub-spec the
family's readers set (never a branch on model_type): the attention kind (ModelArgs.attention_kind ->
engine.model.transformer.ATTENTION_KINDS: attention.py with its per-layer sliding window and sinks
(ModelArgs.attention), mla_attention.py (ModelArgs.mla); the hybrids' layer_types and ModelArgs.linear ->
hybrid_layers.py's Gated DeltaNet and gated attention), the router (ModelArgs.router.kind ->
engine.model.routers.ROUTERS: a gate module and a router object), the experts (ModelArgs.experts), the shared
experts (ModelArgs.shared_experts -> engine.model.shared_experts), the norm (layers.RMSNorm,
hybrid_layers.ZeroCenteredRMSNorm) and the RoPE (ModelArgs.attention.rope_layout -> engine.model.rope_layouts).
A new kind of layer is a new shared block, its table entry and a ModelArgs sub-spec module (not loose fields).

To add an architecture (docs/adding-an-architecture.md says it in full):
1. engine/model/families/<model_type>.py: read_config (and read_metadata for GGUF), its weight names, FAMILY with
   its examples, layers (the docs' table) and any published config as a benchmark shape.
2. One line in registry.py's FAMILIES.
3. Its tiny model in tests/tiny_models.py's TINY_MODELS (written with transformers' own class), which puts it in
   the token-exact tests against transformers (tests/model/test_models.py); add it to GGUF_MODEL_TYPES when it
   has a GGUF format whose tensors are the checkpoint's (a family that transforms them, as gpt_oss and the
   hybrids, has its own tests). Then regenerate the table in docs/models.md (tests/model/test_registry.py).
"""

from engine.model.families.family import Family, GgufFormat
from engine.model.families.gguf_keys import GgufKeys
from engine.model.families.registry import (FAMILIES, GGUF_ARCHITECTURES, family, gguf_family, parse_config,
                                           supported_types)

__all__ = ["FAMILIES", "GGUF_ARCHITECTURES", "Family", "GgufFormat", "GgufKeys", "family", "gguf_family",
           "parse_config", "supported_types"]
