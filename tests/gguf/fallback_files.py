"""Tiny GGUF files whose rows are not whole 256-element super-blocks, as Gemma 4 26B-A4B's (expert rows of 704) and
Nemotron 3 Nano's (a hidden size of 2688) are: a hidden size of 288 and experts of 96 (9 and 3 blocks of 32), so
llama.cpp's quantizer stores them in its 32-element fallback types (Q5_0 in a Q4_K_M file, Q5_1 in a Q5_K_M one,
Q8_0 where it chose Q6_K, IQ4_NL in an IQ4_XS one)."""

import os
from pathlib import Path

import pytest

from tests.gguf.conftest import GgufFiles
from tests.gguf.models import write_model

SHAPE = dict(hidden_size=288, moe_intermediate_size=96)
FALLBACK = {"Q4_K_M": "Q5_0", "Q5_K_M": "Q5_1", "IQ4_XS": "IQ4_NL"}  # file type -> its experts' gate and up types


class FallbackFiles(GgufFiles):
    """As GgufFiles, of models written at SHAPE."""

    def folder(self, model_type: str) -> Path:
        return self._once(("hf", model_type), lambda: write_model(self.root / model_type, model_type, **SHAPE))


@pytest.fixture(scope="session")
def fallback_files(run_artifact) -> FallbackFiles:
    """WISP_GGUF_DIR/fallback when set: files made beforehand on a machine with llama.cpp (the GPU tests')."""
    made = os.environ.get("WISP_GGUF_DIR")
    return FallbackFiles(Path(made) / "fallback" if made else run_artifact("gguf-fallback", lambda folder: None))
