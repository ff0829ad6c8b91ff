"""Tokenize the corpus into the arrays training reads (built here on CPU, carried to the GPU).

``python -m training.dataset --tokenizer resources/demo_model --out .corpus`` writes
tokens.npz with uint16 streams ``train``, ``heldout_code`` and ``heldout_chat`` (documents
joined by <|endoftext|>, training documents shuffled with a fixed seed) and dataset.json with
the counts and the corpus manifest.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from training import corpus
from training.chat_samples import samples_for_file

END_OF_TEXT_ID = 0
CHAT_REPEATS = 2  # chat samples are ~8% of the text; seen twice they are ~15% of training tokens
SEED = 0


def encode_documents(tokenizer: Tokenizer, texts: list[str]) -> list[list[int]]:
    return [e.ids + [END_OF_TEXT_ID] for e in tokenizer.encode_batch(texts, add_special_tokens=False)]


def join(documents: list[list[int]]) -> np.ndarray:
    return np.fromiter((t for d in documents for t in d), dtype=np.uint16)


def split_texts(files: list[corpus.SourceFile]) -> dict[str, list[str]]:
    parts: dict[str, list[str]] = {"code": [], "chat": [], "heldout_code": [], "heldout_chat": []}
    for item in files:
        prefix = "heldout_" if item.is_heldout else ""
        parts[prefix + "code"].append(item.text)
        parts[prefix + "chat"].extend(samples_for_file(item))
    return parts


def build(tokenizer: Tokenizer, files: list[corpus.SourceFile], seed: int = SEED) -> dict[str, np.ndarray]:
    parts = split_texts(files)
    train_documents = encode_documents(tokenizer, parts["code"] + parts["chat"] * CHAT_REPEATS)
    random.Random(seed).shuffle(train_documents)
    return {
        "train": join(train_documents),
        "train_chat_tokens": np.array([CHAT_REPEATS * sum(len(d) for d in encode_documents(tokenizer, parts["chat"]))]),
        "heldout_code": join(encode_documents(tokenizer, parts["heldout_code"])),
        "heldout_chat": join(encode_documents(tokenizer, parts["heldout_chat"])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", required=True, type=Path, help="folder with tokenizer.json")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    tokenizer = Tokenizer.from_file(str(args.tokenizer / "tokenizer.json"))
    files = corpus.collect()
    arrays = build(tokenizer, files)
    args.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out / "tokens.npz", **arrays)
    summary = {name: int(a.size) for name, a in arrays.items() if name != "train_chat_tokens"}
    summary["train_chat_tokens"] = int(arrays["train_chat_tokens"][0])
    summary["manifest"] = corpus.manifest(files)
    (args.out / "dataset.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "manifest"}))


if __name__ == "__main__":
    main()
