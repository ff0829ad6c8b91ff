"""`wisp convert-gguf MODEL_DIR OUT.gguf [--type f32|f16|bf16|q8_0]`: a Hugging Face MoE checkpoint as a GGUF
file that llama.cpp runs, written tensor by tensor (one layer's experts in RAM at a time)."""

from __future__ import annotations

import os
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import ModelFormatError, UnsupportedModelError, WispError
from engine.gguf.linear_specs import transformed_specs
from engine.gguf.named_specs import module_order_specs
from engine.gguf.tensor_map import TensorSpec, gguf_architecture, tensor_specs
from engine.gguf.vocab import Vocab, read_vocab
from engine.model.args import ModelArgs
from engine.model.checkpoint import Checkpoint
from engine.model.families import family
from engine.model.loader import Progress, read_args

OUT_TYPES = ("f32", "f16", "bf16", "q8_0")


@dataclass(frozen=True)
class ConvertResult:
    path: Path
    architecture: str
    num_tensors: int
    size_bytes: int


def convert(model_dir: Path, out_path: Path, out_type: str = "auto", progress: Progress | None = None) -> ConvertResult:
    """Write `out_path` (through a temporary file, renamed at the end); raises WispError subclasses.
    out_type "auto" keeps bf16 checkpoints bf16 and writes f16 otherwise (llama.cpp's converter does the same)."""
    import_gguf()  # the missing-package error before any work
    model_dir, out_path = Path(model_dir), Path(out_path)
    if out_type not in (*OUT_TYPES, "auto"):
        raise UnsupportedModelError(f"GGUF type '{out_type}' is not one of {', '.join(OUT_TYPES)}")
    args = read_args(model_dir)
    out_type = resolved_type(out_type, model_dir, args)
    arch = gguf_architecture(args)
    vocab = read_vocab(model_dir, args.vocab_size)
    specs = gguf_specs(args, Checkpoint(model_dir), arch)
    draft = draft_specs(args, model_dir, arch)
    specs += draft
    with partial_writer(out_path, arch) as writer:
        write_metadata(writer, args, arch, vocab, model_dir.name, out_type, num_draft_layers=1 if draft else 0)
        qtypes = [tensor_type(spec, out_type) for spec in specs]
        for spec, qtype in zip(specs, qtypes):
            writer.add_tensor_info(spec.name, *stored_layout(spec.shape, qtype), raw_dtype=qtype)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for done, (spec, qtype) in enumerate(zip(specs, qtypes)):
            data = spec.load()
            writer.write_tensor_data(data if spec.raw_type is not None else encode(data, qtype))
            if progress:
                progress((done + 1) / len(specs), spec.name)
    return ConvertResult(out_path, arch, len(specs), out_path.stat().st_size)


@contextmanager
def partial_writer(out_path: Path, arch: str):
    """A GGUFWriter on `out_path`.partial, renamed to out_path when the block ends without an error. An OSError is a
    ModelFormatError naming out_path; the partial file never stays behind."""
    partial = out_path.with_name(out_path.name + ".partial")
    writer = import_gguf().GGUFWriter(partial, arch)
    try:
        yield writer
        writer.close()
        os.replace(partial, out_path)
    except OSError as error:
        raise ModelFormatError(f"{out_path}: cannot write it ({error.strerror or error})") from None
    finally:
        writer.close()
        with suppress(OSError):  # no partial file, or a folder that cannot be written (the error above names it)
            partial.unlink()


def resolved_type(out_type: str, model_dir: Path, args: ModelArgs | None = None) -> str:
    """"auto": bf16 for a bf16 checkpoint, else f16; any other type as given."""
    if out_type != "auto":
        return out_type
    args = args or read_args(model_dir)
    return "bf16" if str(args.torch_dtype).removeprefix("torch.") == "bfloat16" else "f16"


def gguf_specs(args: ModelArgs, ckpt: Checkpoint, arch: str) -> list[TensorSpec]:
    """Every tensor of the file, in the order its family's files list them."""
    known = family(args.model_type)
    extra = known.gguf.file_tensors(args) if known.gguf.file_tensors else []
    if known.gguf.module_order:
        dense = None
        if known.gguf.file_args is not None:  # the file's layout differs from the checkpoint's
            dense = transformed_specs(args, known.gguf.file_args(args), ckpt, known.weight_names, arch)
        return extra + module_order_specs(args, ckpt, known.weight_names, arch, dense)
    return extra + tensor_specs(args, ckpt, known.weight_names)


def draft_specs(args: ModelArgs, model_dir: Path, arch: str) -> list[TensorSpec]:
    """The checkpoint's draft (MTP) layer as llama.cpp's converter writes it (engine.gguf.draft_layer), where the
    family's GGUF has one and the checkpoint holds it; else none."""
    from engine.gguf.draft_layer import draft_layer_specs
    from engine.model.mtp_loader import runnable_draft_layer

    if not family(args.model_type).gguf.nextn:
        return []
    names, _, _ = runnable_draft_layer(model_dir, args)
    return draft_layer_specs(args, model_dir, arch) if names is not None else []


def import_gguf():
    try:
        import gguf
    except ImportError:
        raise WispError('writing GGUF files needs the gguf package (a dependency of Wisp): '
                        'pip install "gguf>=0.19"') from None
    return gguf


def tensor_type(spec: TensorSpec, out_type: str):
    """f32 for routers, norms and biases (as llama.cpp's converter); f16 where q8_0 blocks do not fit a row."""
    from gguf import GGMLQuantizationType as Q

    if spec.raw_type is not None:
        return Q(spec.raw_type)
    if spec.keep_f32 or out_type == "f32":
        return Q.F32
    if out_type == "q8_0" and spec.shape[-1] % 32 != 0:
        return Q.F16
    return {"f16": Q.F16, "bf16": Q.BF16, "q8_0": Q.Q8_0}[out_type]


def stored_layout(shape: tuple[int, ...], qtype) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape as the writer takes it, numpy dtype, bytes): float types by element, others as byte rows."""
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import quant_shape_to_byte_shape

    if qtype in (Q.F32, Q.F16):
        dtype = np.dtype(np.float32 if qtype == Q.F32 else np.float16)
        return shape, dtype, int(np.prod(shape)) * dtype.itemsize
    byte_shape = quant_shape_to_byte_shape(shape, qtype)
    return byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape))


def encode(array: np.ndarray, qtype) -> np.ndarray:
    from gguf.quants import quantize

    return quantize(np.ascontiguousarray(array, dtype=np.float32), qtype)


def file_type(out_type: str) -> int:
    from gguf import LlamaFileType as F

    return {"f32": F.ALL_F32, "f16": F.MOSTLY_F16, "bf16": F.MOSTLY_BF16, "q8_0": F.MOSTLY_Q8_0}[out_type]


def write_metadata(writer, args: ModelArgs, arch: str, vocab: Vocab, name: str, out_type: str,
                   num_draft_layers: int = 0) -> None:
    """Hyperparameters under `{arch}.*` as llama.cpp reads them, then the tokenizer."""
    write_hparams(writer, args, arch, name, out_type, num_draft_layers)
    write_vocab(writer, vocab)


def write_hparams(writer, args: ModelArgs, arch: str, name: str, out_type: str, num_draft_layers: int = 0) -> None:
    """The name, file type and hyperparameters under `{arch}.*` as llama.cpp reads them (no tokenizer); block_count
    counts the draft layers written after the model's (nextn_predict_layers, where the family's GGUF has them)."""
    import gguf

    writer.add_name(name)
    writer.add_file_type(file_type(out_type))
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_context_length(args.max_position_embeddings)
    writer.add_embedding_length(args.hidden_size)
    writer.add_block_count(args.num_hidden_layers + num_draft_layers)
    if family(args.model_type).gguf.nextn:
        writer.add_nextn_predict_layers(num_draft_layers)
    writer.add_head_count(args.num_attention_heads)
    (family(args.model_type).gguf.write_layer_keys or write_layer_keys)(writer, args)
    writer.add_layer_norm_rms_eps(args.rms_norm_eps)
    writer.add_vocab_size(args.vocab_size)
    writer.add_expert_count(args.num_experts)
    writer.add_expert_used_count(args.num_experts_per_tok)
    writer.add_expert_feed_forward_length(args.moe_intermediate_size)
    if args.shared_experts.shared_expert_intermediate_size:
        writer.add_expert_shared_feed_forward_length(args.shared_experts.shared_expert_intermediate_size)
    if args.attention.clip_qkv:
        writer.add_clamp_kqv(args.attention.clip_qkv)
    family(args.model_type).gguf.write_metadata(writer, args)


def write_layer_keys(writer, args: ModelArgs) -> None:
    """The per-layer shapes most llama.cpp architectures share: feed-forward length, KV heads, head sizes, RoPE."""
    writer.add_feed_forward_length(args.intermediate_size or args.moe_intermediate_size)
    writer.add_head_count_kv(args.num_key_value_heads)
    writer.add_key_length(args.head_dim)
    writer.add_value_length(args.head_dim)
    writer.add_rope_dimension_count(int(args.head_dim * args.attention.partial_rotary_factor))
    writer.add_rope_freq_base(args.rope_theta)


def write_vocab(writer, vocab: Vocab) -> None:
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(vocab.pre)
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.token_types)
    writer.add_token_merges(vocab.merges)
    for token_id, add in ((vocab.bos_token_id, writer.add_bos_token_id), (vocab.eos_token_id, writer.add_eos_token_id),
                          (vocab.pad_token_id, writer.add_pad_token_id)):
        if token_id is not None:
            add(token_id)
    writer.add_add_bos_token(vocab.add_bos)
    templates = vocab.chat_templates
    if set(templates) == {"default"}:
        writer.add_chat_template(templates["default"])
    elif templates:
        writer.add_chat_template([{"name": name, "template": source} for name, source in templates.items()])
