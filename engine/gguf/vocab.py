"""The tokenizer part of a GGUF file (tokenizer.ggml.*) from a Hugging Face folder with tokenizer.json.

llama.cpp re-implements tokenizers itself: a byte-level BPE vocabulary ("gpt2") plus the name of a
pre-tokenizer regex it knows ("tokenizer.ggml.pre"). Only pre-tokenizers whose regex matches one of
llama.cpp's are converted; anything else is refused rather than tokenised differently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.errors import TokenizerError, UnsupportedModelError
from engine.text.tokenizer import Tokenizer, _load_chat_templates  # the same template rules as HF folders

# tokenizer.json Split regex -> llama.cpp pre-tokenizer name (llama-vocab.cpp lists the same regexes)
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
               r"|\s+(?!\S)|\s+")
LLAMA3_REGEX = QWEN2_REGEX.replace(r"|\p{N}|", r"|\p{N}{1,3}|")
GPT4O_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
               r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
               r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
               r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
               r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")  # o200k (gpt-oss)
SPLIT_REGEXES = {QWEN2_REGEX: "qwen2", LLAMA3_REGEX: "llama-bpe", GPT4O_REGEX: "gpt-4o"}

# gguf's TokenType values
NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5


@dataclass(frozen=True)
class Vocab:
    tokens: list[str]
    token_types: list[int]
    merges: list[str]
    pre: str
    eos_token_id: int | None
    bos_token_id: int | None
    pad_token_id: int | None
    add_bos: bool
    chat_templates: dict[str, str]


def read_vocab(folder: Path, vocab_size: int) -> Vocab:
    """The vocabulary padded to the model's vocab_size; raises UnsupportedModelError for tokenizers llama.cpp
    would split differently."""
    path = folder / "tokenizer.json"
    data = _read_tokenizer_json(path)
    model = data.get("model") or {}
    if model.get("type") != "BPE" or model.get("byte_fallback"):
        raise UnsupportedModelError(f"{path}: only byte-level BPE tokenizers (GPT-2 / Qwen / Llama 3 style) convert "
                                    f"to GGUF here, this one is {model.get('type')} (SentencePiece-style)")
    tokens, types = _tokens(data, vocab_size, path)
    tokenizer = Tokenizer.from_folder(folder)
    eos_text = tokenizer.special_tokens.get("eos_token")
    eos_token_id = tokenizer.token_to_id(eos_text) if eos_text else min(tokenizer.eos_token_ids, default=None)
    return Vocab(
        tokens=tokens, token_types=types, merges=[_merge(m) for m in model.get("merges") or []],
        pre=pre_tokenizer_name(data.get("pre_tokenizer"), path),
        eos_token_id=eos_token_id, bos_token_id=tokenizer.bos_token_id, pad_token_id=tokenizer.pad_token_id,
        add_bos=_adds_bos(tokenizer),
        chat_templates={name: t.source for name, t in _load_chat_templates(folder, _tokenizer_config(folder)).items()},
    )


def pre_tokenizer_name(pre_tokenizer: dict | None, path: Path) -> str:
    if pre_tokenizer and pre_tokenizer.get("type") == "ByteLevel" and pre_tokenizer.get("use_regex", True):
        return "gpt-2"
    steps = (pre_tokenizer or {}).get("pretokenizers") or []
    if (len(steps) == 2 and steps[0].get("type") == "Split" and steps[1].get("type") == "ByteLevel"
            and not steps[1].get("use_regex", True)):
        name = SPLIT_REGEXES.get((steps[0].get("pattern") or {}).get("Regex"))
        if name:
            return name
    raise UnsupportedModelError(f"{path}: its pre-tokenizer is not one llama.cpp knows by name (GPT-2, Qwen2, "
                                "Llama 3); a GGUF of it would tokenise text differently")


def _read_tokenizer_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as error:
        raise TokenizerError(f"{path}: cannot read it ({type(error).__name__}: {error})") from None


def _tokenizer_config(folder: Path) -> dict:
    path = folder / "tokenizer_config.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _tokens(data: dict, vocab_size: int, path: Path) -> tuple[list[str], list[int]]:
    """Token strings and types by id; ids the tokenizer lacks up to the embedding size become [PAD{id}]."""
    by_id: dict[int, tuple[str, int]] = {i: (text, NORMAL) for text, i in data["model"]["vocab"].items()}
    for added in data.get("added_tokens") or []:
        by_id[added["id"]] = (added["content"], CONTROL if added.get("special") else USER_DEFINED)
    if max(by_id, default=-1) >= vocab_size:
        raise UnsupportedModelError(f"{path}: token id {max(by_id)} is beyond the model's vocab_size {vocab_size}")
    pairs = [by_id.get(i, (f"[PAD{i}]", UNUSED)) for i in range(vocab_size)]
    return [text for text, _ in pairs], [kind for _, kind in pairs]


def _merge(merge) -> str:
    return merge if isinstance(merge, str) else " ".join(merge)


def _adds_bos(tokenizer: Tokenizer) -> bool:
    """Whether the tokenizer's post-processor puts BOS in front of raw text (llama.cpp's add_bos_token)."""
    ids = tokenizer.encode("a", add_special_tokens=True)
    return bool(ids) and tokenizer.bos_token_id is not None and ids[0] == tokenizer.bos_token_id
