"""Train the demo model's byte-level BPE tokenizer with `tokenizers` and save it in HF format.

``python -m training.bpe --out resources/demo_model`` trains on the corpus' training
files (corpus.py) and writes tokenizer.json, tokenizer_config.json (with the chat template),
chat_template.jinja and special_tokens_map.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from training import corpus

VOCAB_SIZE = 4096
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # ids 0, 1, 2
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def new_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def train(texts: list[str], vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    tokenizer = new_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer, length=len(texts))
    return tokenizer


def tokenizer_config() -> dict:
    added = {
        str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                 "single_word": False, "special": True}
        for i, t in enumerate(SPECIAL_TOKENS)
    }
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": added,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "model_max_length": 2048,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }


def save(tokenizer: Tokenizer, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n")
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE + "\n")
    special = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
               "additional_special_tokens": ["<|im_start|>", "<|im_end|>"]}
    (out / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    args = parser.parse_args()
    texts = [f.text for f in corpus.collect() if not f.is_heldout]
    tokenizer = train(texts, args.vocab_size)
    for i, token in enumerate(SPECIAL_TOKENS):
        assert tokenizer.token_to_id(token) == i, token
    save(tokenizer, args.out)
    print(f"vocab {tokenizer.get_vocab_size()} -> {args.out}")


if __name__ == "__main__":
    main()
