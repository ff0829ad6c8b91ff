"""Count tokens the way the loaded model will: with its tokenizer.json (the `tokenizers` library, which the
engine uses too). Without one (no model yet, a GGUF file) it estimates four characters per token."""

from __future__ import annotations

import math
from pathlib import Path


class TokenCounter:
    def __init__(self, model_path: str | None = None):
        self._tokenizer = None
        tokenizer_file = Path(model_path) / "tokenizer.json" if model_path else None
        if tokenizer_file is not None and tokenizer_file.is_file():
            from tokenizers import Tokenizer

            self._tokenizer = Tokenizer.from_file(str(tokenizer_file))

    @property
    def is_exact(self) -> bool:
        return self._tokenizer is not None

    def count(self, text: str) -> int:
        if self._tokenizer is None:
            return math.ceil(len(text) / 4)
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)
