"""Tokenizers for the tokenizer tests: byte-level BPE folders with Qwen2 / Llama 3 split regexes, and a
SentencePiece-style (Mixtral) vocabulary written into a copy of a GGUF file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from engine.gguf.vocab import CONTROL, NORMAL
from tests.tiny_models import CHAT_TEMPLATE, CORPUS, SPECIALS, VOCAB

UNKNOWN, BYTE = 2, 6


# Qwen's fill-in-the-middle tokens (llama.cpp stops on pad, repo and file separator) and a plain added token
EXTRA_SPECIALS = ["<|fim_prefix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]
USER_TOKEN = "<think>"


def save_split_tokenizer(folder: Path, regex: str, ignore_merges: bool) -> None:
    """tests/tiny_models' tokenizer with a Split(regex) + ByteLevel pre-tokenizer, as Qwen2 and Llama 3 ship,
    plus Qwen's FIM special tokens and a non-special added token."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(regex), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[*SPECIALS, *EXTRA_SPECIALS, USER_TOKEN],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    data = json.loads(tok.to_str())
    data["model"]["ignore_merges"] = ignore_merges
    for added in data["added_tokens"]:
        added["special"] = added["content"] != USER_TOKEN
    fast = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(data)), eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    for stale in ("tokenizer.json", "tokenizer_config.json"):
        (folder / stale).unlink(missing_ok=True)
    fast.save_pretrained(folder)


def spm_vocab(size: int) -> tuple[list[str], list[float], list[int]]:
    """<unk> <s> </s>, two ChatML control tokens, 256 byte tokens, then pieces of a BPE trained on the corpus
    with SentencePiece's ▁ spaces; scores fall with merge order, as in SentencePiece BPE models."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    head = [("<unk>", UNKNOWN), ("<s>", CONTROL), ("</s>", CONTROL), ("<|im_start|>", CONTROL), ("<|im_end|>", CONTROL)]
    head += [(f"<0x{b:02X}>", BYTE) for b in range(256)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=size, limit_alphabet=60))
    pieces = [piece for piece, _ in sorted(tok.get_vocab().items(), key=lambda item: item[1])]
    pieces = pieces[:size - len(head)]
    tokens = [text for text, _ in head] + pieces
    types = [kind for _, kind in head] + [NORMAL] * len(pieces)
    scores = [0.0] * len(head) + [-float(i) for i in range(len(pieces))]
    return tokens, scores, types


def with_spm_vocab(source: Path, out: Path) -> Path:
    """A copy of the GGUF file `source` whose tokenizer is a SentencePiece ("llama") vocabulary."""

    def add_vocab(writer, fields) -> None:
        arch = fields["general.architecture"].contents()
        tokens, scores, types = spm_vocab(int(fields[f"{arch}.vocab_size"].contents()))
        writer.add_tokenizer_model("llama")
        writer.add_token_list(tokens)
        writer.add_token_scores(scores)
        writer.add_token_types(types)
        writer.add_unk_token_id(0)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
        writer.add_add_bos_token(True)
        writer.add_add_eos_token(False)
        writer.add_chat_template(CHAT_TEMPLATE)

    return rewrite_gguf(source, out, lambda key: not key.startswith("tokenizer."), add_vocab)


def rewrite_gguf(source: Path, out: Path, keep=lambda key: True, add=lambda writer, fields: None,
                 architecture: str | None = None, tensors=lambda reader: [(t.name, t.data, t.tensor_type) for t in
                                                                          reader.tensors]) -> Path:
    """A copy of a (small) GGUF file with the metadata keys `keep` accepts, plus what `add(writer, fields)`
    writes; `architecture` replaces general.architecture; `tensors(reader)` lists (name, data as GGUFReader
    gives it, quant type) to write."""
    import gguf

    reader = gguf.GGUFReader(source)
    writer = gguf.GGUFWriter(out, architecture or reader.fields["general.architecture"].contents())
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture" or not keep(field.name):
            continue
        sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), field.types[0], sub_type=sub_type)
    add(writer, reader.fields)
    for name, data, qtype in tensors(reader):
        data = np.ascontiguousarray(data)
        writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)  # a byte shape for quantized types
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def split_experts(reader):
    """The tensors of a stacked-expert file laid out as older GGUF files store experts: blk.N.ffn_gate.E.weight,
    ffn_down.E, ffn_up.E, expert after expert."""
    stacked = {t.name: t for t in reader.tensors if "_exps." in t.name}
    for tensor in reader.tensors:
        if tensor.name in stacked:
            if "ffn_gate_exps" not in tensor.name:
                continue
            layer = tensor.name.split(".")[1]
            parts = [stacked[f"blk.{layer}.ffn_{proj}_exps.weight"] for proj in ("gate", "down", "up")]
            for e in range(tensor.data.shape[0]):
                for proj, part in zip(("gate", "down", "up"), parts):
                    yield f"blk.{layer}.ffn_{proj}.{e}.weight", part.data[e], part.tensor_type
        else:
            yield tensor.name, tensor.data, tensor.tensor_type
