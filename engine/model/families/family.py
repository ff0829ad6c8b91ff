"""Family and GgufFormat: what one architecture tells the rest of the engine (engine.model.families says how to
add one)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from engine.model.args import ModelArgs
from engine.model.families.gguf_keys import GgufKeys
from engine.model.families.tensor_spec import TensorSpec
from engine.model.mtp_names import DraftLayerNames
from engine.model.weight_names import MoeWeightNames


def _accepts(args: ModelArgs) -> None:
    """The default convertibility check: any checkpoint the family reads converts."""


def _writes_nothing(writer, args: ModelArgs) -> None:
    """The default: no `{arch}.*` keys beyond the shared ones."""


def _reads_every_file(key: GgufKeys) -> bool:
    """The default: the family reads every file of its architecture (no other family shares it)."""
    return True


@dataclass(frozen=True)
class JoinedTensor:
    """One Wisp parameter that llama.cpp's files store otherwise, as one or several tensors within blk.N (`parts`,
    their names there: MLA's kv_b_proj split into attn_k_b.weight and attn_v_b.weight, Mamba-2's A_log as
    ssm_a = -exp(A_log)): convert-gguf writes split(args, weight) -> one array per part (of shapes(args)), the reader
    computes the parameter back (join(args, parts)); f32 numpy arrays in torch order. A file that lacks the parts
    is read under the parameter's own name (older MLA files hold attn_kv_b whole)."""

    parts: tuple[str, ...]
    shapes: Callable[[ModelArgs], tuple[tuple[int, ...], ...]]
    split: Callable[[ModelArgs, object], tuple]
    join: Callable[[ModelArgs, list], object]
    keep_f32: bool = False  # written f32 whatever the file type


@dataclass(frozen=True)
class GgufFormat:
    """The family in llama.cpp's GGUF files."""

    arch: str  # general.architecture
    read_metadata: Callable[[GgufKeys], ModelArgs]  # the file's `{arch}.*` keys and tensor shapes -> ModelArgs
    # Wisp module (as in MoeTransformer.named_parameters, within a layer) -> GGUF tensor base name, where the
    # family's file names it otherwise than llama.cpp's shared names (engine.gguf.tensor_map)
    layer_modules: Mapping[str, str] = field(default_factory=dict)
    # Wisp parameter within a layer that is no module's weight or bias -> its GGUF tensor within blk.N, beyond the
    # shared ones (engine.gguf.param_names.BARE_PARAMS: attention sinks, the router's correction bias)
    layer_params: Mapping[str, str] = field(default_factory=dict)
    # Wisp parameter outside the layers -> its GGUF tensor, where the family's files name it otherwise than
    # llama.cpp's shared names (lfm2moe's final norm is token_embd_norm)
    global_params: Mapping[str, str] = field(default_factory=dict)
    # GGUF tensor bases within blk.N that llama.cpp's graph reads as f32 only (convolution kernels): convert-gguf
    # writes them f32 whatever the file type
    f32_tensors: tuple[str, ...] = ()
    rotary_permuted: bool = False  # q/k rows in llama.cpp's adjacent-pair RoPE order (its `llama` architecture)
    # convert-gguf: raises UnsupportedModelError for a checkpoint whose GGUF llama.cpp would compute differently
    check_convertible: Callable[[ModelArgs], None] = _accepts
    write_metadata: Callable[[object, ModelArgs], None] = _writes_nothing  # keys beyond the shared ones
    # (writer, args) -> feed_forward_length, head_count_kv, key_length, value_length, rope.dimension_count and
    # rope.freq_base where the family's files describe the layers otherwise (MLA's compressed row, per-layer KV
    # heads or feed-forward lengths, sliding layers' own sizes); None: engine.gguf.convert's
    write_layer_keys: Callable[[object, ModelArgs], None] | None = None
    # block_count counts layers past num_hidden_layers that Wisp does not run (multi-token prediction): their
    # tensors are expected in the file and left unread
    trailing_layers: bool = False
    # llama.cpp's converter writes the checkpoint's draft layer as the trailing blk.{n} with nextn.* tensors and
    # `{arch}.nextn_predict_layers`: convert-gguf writes it and --speculative mtp reads it (engine.gguf.draft_layer)
    nextn: bool = False
    # convert-gguf writes the dense tensors in Wisp's parameter order under these names (engine.gguf.named_specs)
    # rather than in the checkpoint's order through the shared table (engine.gguf.tensor_map.tensor_specs)
    module_order: bool = False
    # (args, checkpoint, weight names, layer) -> one MoE layer's expert tensors, where the family stores them its
    # own way; None: the stacked gate/up/down of the shared table (engine.gguf.tensor_map.stacked_expert_specs)
    expert_specs: Callable[[ModelArgs, object, MoeWeightNames, int], list[TensorSpec]] | None = None
    # a checkpoint's args -> the same model in the layout of its GGUF file, where that differs (module_order only):
    # convert-gguf computes the file's dense tensors from the checkpoint's (engine.gguf.linear_specs)
    file_args: Callable[[ModelArgs], ModelArgs] | None = None
    # args -> the tensors the files hold beyond Wisp's parameters, computed from the model's numbers (gemma4's
    # rope_freqs): convert-gguf writes them, the reader expects them and leaves them unread
    file_tensors: Callable[[ModelArgs], list[TensorSpec]] | None = None
    # Wisp parameter within a layer -> the tensors the files store it as (MLA's kv_b_proj, Mamba-2's A_log)
    joined: Mapping[str, JoinedTensor] = field(default_factory=dict)
    # which files of `arch` the family reads, from their metadata, where several families share the architecture
    # (registry.gguf_family tries them in the registry's order); they name their tensors alike
    reads: Callable[[GgufKeys], bool] = _reads_every_file
    refusal: str = ""  # what `reads` asks of a file, for the error that names a file no family reads
    # llama.cpp's projector type (clip.vision.projector_type) of the vision tower its files pair with, an
    # mmproj-*.gguf beside them (engine.loading.mmproj_pairing); empty: the files take no images on Wisp's engine
    mmproj_projector: str = ""


@dataclass(frozen=True)
class Family:
    """One architecture: a Hugging Face model_type and, where llama.cpp has it, its GGUF architecture."""

    model_type: str  # config.json's "model_type"
    read_config: Callable[[dict], ModelArgs]  # config.json -> ModelArgs (model_type set to this family's)
    weight_names: MoeWeightNames  # the checkpoint's names of the MoE block (router, experts)
    gguf: GgufFormat | None = None  # None: Wisp reads no GGUF file of this family
    reads_quantization: bool = False  # read_config reads config.json's quantization_config (others are refused)
    # the published models of the family and its layers in a phrase: the architectures table (families.table)
    examples: tuple[str, ...] = ()
    layers: str = ""
    # benchmark shape name -> a published config.json of the family (engine.model.published_configs), parsed as a
    # checkpoint's config is: `wisp configure --model NAME`, `wisp bench --shape NAME` (engine.model.shapes)
    shapes: Mapping[str, dict] = field(default_factory=dict)
    # the checkpoint stacks each layer's experts with gate and up interleaved column by column (gpt_oss), loaded by
    # engine.model.interleaved_experts; otherwise per-expert tensors or transformers' stacked [gate | up]
    interleaved_experts: bool = False
    draft_layer: DraftLayerNames | None = None  # where a checkpoint keeps its MTP layer (engine.model.mtp_names)
