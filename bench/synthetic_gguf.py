"""A GGUF file of random weights in a real model's shape (Qwen3-30B-A3B, Qwen3.5-35B-A3B, ...) quantized by
llama.cpp, so llama.cpp and Wisp run the same file (bench/results/2026-12-01-h200-h2h). The f16 file of the whole
shape (61 GB) does not fit the GPU machine's disk beside its quantized copies, so a template of a few full-width
layers is quantized and the file assembled from it:

    python bench/synthetic_gguf.py template T-f16.gguf [--shape qwen3.5-35b-a3b]  # f16, every tensor at full size
    llama-quantize T-f16.gguf T-Q4_K_M.gguf Q4_K_M 16                            # llama.cpp picks and makes every type
    python bench/synthetic_gguf.py assemble T-Q4_K_M.gguf Q4_K_M.gguf --layers 48  # (40 for qwen3.5-35b-a3b)
    python bench/synthetic_gguf.py sizes --shape qwen3-next-80b-a3b  # the files' bytes, before any is written

llama.cpp's use_more_bits rule gives some layers richer types (attn_v or the DeltaNet's attn_qkv, and ffn_down:
Q6_K at Q4_K_M). A plain template has two layers: layer 0 gets the plain types, layer 1 the richer ones. A hybrid
template (Gated DeltaNet + full attention: qwen35moe, qwen3next) has four, alternating linear and full attention
(full_attention_interval 2), so each (layer kind, plain or richer) pair is one template layer. Each assembled layer copies the template
layer of its kind whose ffn_down type that rule gives it at the assembled layer count (engine.quant.file_types),
so the file's type mix is that of a whole Q4_K_M file. Each layer's experts, and the router rows that select them,
are permuted by that layer's own random permutation, so no two layers hold the same bytes in the same order.
"""

from __future__ import annotations

import argparse
import errno
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.gguf.convert import import_gguf, write_hparams  # noqa: E402
from engine.gguf.named_specs import keeps_f32  # noqa: E402
from engine.gguf.param_names import gguf_name  # noqa: E402
from engine.gguf.tensor_map import gguf_architecture  # noqa: E402
from engine.model.families.tensor_spec import EXPERTS  # noqa: E402
from engine.model.args import ModelArgs  # noqa: E402
from engine.model.families import family  # noqa: E402
from engine.model.families.hybrid_gguf import DEFAULT_INTERVAL  # noqa: E402
from engine.model.shapes import SHAPES, shape  # noqa: E402
from engine.model.model_tree import meta_model  # noqa: E402
from engine.quant.file_types import expert_types  # noqa: E402
from bench.synthetic_gguf_sizes import synthetic_sizes  # noqa: E402

WEIGHT_STD = 0.02  # as engine.bench.synthetic: activations stay finite through 48 random layers
PERMUTED = {f"{name}.weight" for name in EXPERTS.values()} | {"ffn_gate_inp.weight"}  # [E, ...] tensors
BYTE, CONTROL, NORMAL, UNKNOWN = 6, 3, 1, 2  # gguf TokenType values
LINEAR, FULL = "linear_attention", "full_attention"
LINEAR_MARK = "attn_qkv.weight"  # the DeltaNet's q|k|v projection: only linear-attention layers have it
DECAY = "ssm_a"  # the DeltaNet's A = -exp(A_log), stored as llama.cpp's converter writes it
CONV = "ssm_conv1d.weight"  # llama.cpp's ssm_conv reads an f32 kernel (its converter stores it f32)


def template_args(name: str, layers: int | None = None) -> ModelArgs:
    """The f16 template's args: the shape at full width, 2 layers, or for a hybrid shape 4 layers alternating linear
    and full attention (llama.cpp reads the kinds from full_attention_interval = 2)."""
    args = shape(name)
    hybrid = args.linear is not None
    layers = layers or (4 if hybrid else 2)
    args = shape(name, layers)
    if hybrid:
        layer_types = tuple(FULL if (i + 1) % 2 == 0 else LINEAR for i in range(layers))
        args = replace(args, layer_types=layer_types)
    return replace(args, torch_dtype="float16")


def file_layout(args: ModelArgs) -> ModelArgs:
    """args in its GGUF file's layout (a hybrid's DeltaNet tensors as llama.cpp stores them)."""
    to_file = family(args.model_type).gguf.file_args
    return to_file(args) if to_file is not None else args


def template_tensors(args: ModelArgs) -> list[tuple[str, tuple[int, ...], bool]]:
    """(GGUF name, numpy shape, stored f32) of every tensor of args, experts stacked [E, out, in] per layer.
    Routers, norms and other 1-D tensors stay f32 and size-1 dimensions are dropped, as llama.cpp's converter does."""
    arch = gguf_architecture(args)
    tensors = []
    for param, value in meta_model(file_layout(args)).named_parameters():
        name = gguf_name(param, arch)
        shape_ = tuple(d for d in value.shape if d != 1) if value.dim() > 1 else tuple(value.shape)
        tensors.append((name, shape_, keeps_f32(name, shape_) or name.endswith(CONV)))
    inter, hidden = args.moe_intermediate_size, args.hidden_size
    for layer in range(args.num_hidden_layers):
        for projection, shape_ in (("gate", (inter, hidden)), ("up", (inter, hidden)), ("down", (hidden, inter))):
            tensors.append((f"blk.{layer}.{EXPERTS[projection]}.weight", (args.num_experts, *shape_), False))
    return tensors


def write_synthetic_vocab(writer, size: int) -> None:
    """A SentencePiece ("llama") vocabulary of `size` tokens: <unk> <s> </s>, the 256 byte tokens, then filler.
    Benchmarks feed token ids, so the strings only have to be distinct and loadable by llama.cpp and Wisp."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"\u2581t{i}" for i in range(len(tokens), size)]
    types = [UNKNOWN, CONTROL, CONTROL] + [BYTE] * 256 + [NORMAL] * (size - 259)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens[:size])
    writer.add_token_scores([0.0] * size)
    writer.add_token_types(types[:size])
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(False)


def write_template(out: Path, args: ModelArgs, seed: int = 0, device: str = "cpu") -> Path:
    """An f16 GGUF of args (norms = 1, routers and norms f32, the rest N(0, WEIGHT_STD)), written tensor by tensor;
    the values are drawn on `device` (cuda: a 2.5 GB template in seconds)."""
    gguf = import_gguf()
    writer = gguf.GGUFWriter(out, gguf_architecture(args))
    write_hparams(writer, args, gguf_architecture(args), f"synthetic {args.model_type}", "f16")
    write_synthetic_vocab(writer, args.vocab_size)
    tensors = template_tensors(args)
    for name, shape_, f32 in tensors:
        dtype = np.dtype(np.float32 if f32 else np.float16)
        writer.add_tensor_info(name, shape_, dtype, int(np.prod(shape_)) * dtype.itemsize)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    generator = torch.Generator(device=device).manual_seed(seed)
    for name, shape_, f32 in tensors:
        value = torch.randn(shape_, generator=generator, device=device).mul_(WEIGHT_STD)
        if "norm" in name:
            value = torch.ones(shape_, device=device)
        elif name.endswith(DECAY):  # a decay rate in (0, 1) per step, as engine.bench.synthetic's A_log gives
            value = value.exp_().neg_()
        writer.write_tensor_data(value.to(torch.float32 if f32 else torch.float16).cpu().numpy())
    writer.close()
    return out


def layer_kinds(reader, arch: str, layers: int) -> list[str]:
    """The attention kind of each of a file's `layers` layers: linear (Gated DeltaNet) where its template's layers
    have the DeltaNet's tensors, else full attention every full_attention_interval-th layer (its kept value)."""
    field = reader.fields.get(f"{arch}.full_attention_interval")
    if field is None:
        return [FULL] * layers
    interval = int(field.contents())
    return [FULL if (i + 1) % interval == 0 else LINEAR for i in range(layers)]


def template_kinds(reader) -> dict[int, str]:
    names = {t.name for t in reader.tensors}
    layers = sorted({int(name.split(".")[1]) for name in names if name.startswith("blk.")})
    return {i: LINEAR if f"blk.{i}.{LINEAR_MARK}" in names else FULL for i in layers}


def layer_sources(reader, arch: str, file_type: str, layers: int, interval: int | None = None) -> dict[int, int]:
    """{assembled layer: template layer} of the same attention kind with the ffn_down type llama.cpp's rule gives
    the assembled layer (attn_v / attn_qkv follow the same rule: one of them per layer). `interval`: the assembled
    file's full_attention_interval (a hybrid's; None keeps the template's)."""
    from gguf import GGMLQuantizationType

    by_kind_type: dict[tuple[str, str], int] = {}
    for layer, kind in template_kinds(reader).items():
        tensor = next(t for t in reader.tensors if t.name == f"blk.{layer}.ffn_down_exps.weight")
        by_kind_type.setdefault((kind, GGMLQuantizationType(tensor.tensor_type).name), layer)
    kinds = ([FULL if (i + 1) % interval == 0 else LINEAR for i in range(layers)] if interval
             else layer_kinds(reader, arch, layers))
    wanted = {layer: (kinds[layer], types[2]) for layer, types in
              expert_types(file_type, list(range(layers)), layers, *expert_rows(reader)).items()}
    missing = sorted(set(wanted.values()) - set(by_kind_type))
    if missing:
        have = ", ".join(f"{kind} {type_}" for kind, type_ in sorted(by_kind_type))
        raise ValueError(f"the template has no layer of {', '.join(f'{k} with ffn_down {t}' for k, t in missing)} "
                         f"(it has {have}): quantize a template made by `template`")
    return {layer: by_kind_type[key] for layer, key in wanted.items()}


def expert_rows(reader) -> tuple[int, int]:
    """(hidden, intermediate): the row lengths (ne[0]) of the template's expert up and down matrices (every MoE
    layer's are the same)."""
    rows = {}
    for tensor in reader.tensors:
        rows.setdefault(tensor.name.split(".")[-2], int(tensor.shape[0]))
    return rows["ffn_up_exps"], rows["ffn_down_exps"]


def file_type_name(reader) -> str:
    """general.file_type as engine.quant.file_types names it (15 -> "Q4_K_M")."""
    from gguf import LlamaFileType

    return LlamaFileType(int(reader.fields["general.file_type"].contents())).name.removeprefix("MOSTLY_")


def assemble(template: Path, out: Path, layers: int, seed: int = 0, interval: int | None = None) -> dict[int, int]:
    """Write `out`: the template's metadata with block_count = layers (and a hybrid's full_attention_interval =
    interval), its global tensors, and each layer copied from its source template layer with experts (and router
    rows) permuted. Returns {layer: template layer}."""
    gguf = import_gguf()
    reader = gguf.GGUFReader(template)
    arch = reader.fields["general.architecture"].contents()
    hybrid = f"{arch}.full_attention_interval" in reader.fields
    interval = (interval or DEFAULT_INTERVAL) if hybrid else None
    sources = layer_sources(reader, arch, file_type_name(reader), layers, interval)
    plan = [(t.name, t) for t in reader.tensors if not t.name.startswith("blk.")]
    for layer, source in sources.items():
        prefix = f"blk.{source}."
        plan += [(f"blk.{layer}.{t.name[len(prefix):]}", t) for t in reader.tensors if t.name.startswith(prefix)]
    check_room(out, sum(int(tensor.n_bytes) for _, tensor in plan))
    new_values = {f"{arch}.block_count": layers, f"{arch}.full_attention_interval": interval}
    writer = gguf.GGUFWriter(out, arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = new_values[name] if name in new_values else field.contents()
        sub_type = field.types[1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, value, field.types[0], sub_type)
    for name, tensor in plan:
        writer.add_tensor_info(name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes,
                               raw_dtype=gguf.GGMLQuantizationType(tensor.tensor_type))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    rng = np.random.default_rng(seed)
    perms = {layer: rng.permutation(int(reader.fields[f"{arch}.expert_count"].contents())) for layer in sources}
    for name, tensor in plan:
        layer, suffix = (int(name.split(".")[1]), name.split(".", 2)[2]) if name.startswith("blk.") else (None, "")
        data = np.take(tensor.data, perms[layer], axis=0) if suffix in PERMUTED else tensor.data
        writer.write_tensor_data(np.ascontiguousarray(data))
    writer.close()
    return sources


def check_room(out: Path, needed: int) -> None:
    """An OSError before writing `needed` bytes to out's disk if it has less free (a 45 GiB file stops no later)."""
    free = shutil.disk_usage(out.resolve().parent).free
    if free < needed:
        raise OSError(errno.ENOSPC,
                      f"{out} needs {needed / 2**30:.1f} GiB and its disk has {free / 2**30:.1f} GiB free")


def print_sizes(name: str, file_type: str) -> None:
    sizes = synthetic_sizes(name, file_type)
    print(f"{name} {file_type}: f16 template {sizes.template_f16 / 2**30:.2f} GiB, quantized template "
          f"{sizes.template_quantized / 2**30:.2f} GiB, assembled file {sizes.assembled / 2**30:.2f} GiB, "
          f"peak disk {sizes.peak_disk / 2**30:.2f} GiB (estimates by llama.cpp's type rules, but the f16 template)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    template = commands.add_parser("template", help="an f16 template of the shape at full width")
    template.add_argument("out", type=Path)
    template.add_argument("--shape", default="qwen3-30b-a3b", choices=sorted(SHAPES))
    template.add_argument("--layers", type=int, help="2, or 4 for a hybrid shape")
    template.add_argument("--seed", type=int, default=0)
    template.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    build = commands.add_parser("assemble", help="a file of --layers layers from a quantized template")
    build.add_argument("template", type=Path)
    build.add_argument("out", type=Path)
    build.add_argument("--layers", type=int, default=48)
    build.add_argument("--seed", type=int, default=0)
    build.add_argument("--interval", type=int, help=f"a hybrid's full_attention_interval (default {DEFAULT_INTERVAL})")
    sizes = commands.add_parser("sizes", help="the bytes of the shape's template and assembled file")
    sizes.add_argument("--shape", default="qwen3-30b-a3b", choices=sorted(SHAPES))
    sizes.add_argument("--type", default="Q4_K_M", help="a k-quant file type")
    args = parser.parse_args(argv)
    try:
        run(args)
    except (ValueError, OSError) as error:
        print(f"synthetic_gguf: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def run(args) -> None:
    if args.command == "template":
        model_args = template_args(args.shape, args.layers)
        check_room(args.out, synthetic_sizes(args.shape).template_f16)
        print(f"wrote {write_template(args.out, model_args, args.seed, args.device)}")
    elif args.command == "sizes":
        print_sizes(args.shape, args.type)
    else:
        sources = assemble(args.template, args.out, args.layers, args.seed, args.interval)
        print(f"wrote {args.out}: {args.out.stat().st_size / 2**30:.2f} GiB, layer <- template layer {sources}")


if __name__ == "__main__":
    main()
