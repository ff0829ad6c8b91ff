"""Tiny GGUF files of peaked models (tests/gguf/models.write_model's `peak`): on these another implementation's
rounding (llama.cpp's activation quantization, bf16 on a GPU) moves logits far less than their margins.
`peaked_files` (peak 30): attention and the experts still move the logits a lot (teacher-forced comparisons);
`greedy_files` (peak 50): every greedy step of 32 has a clear winner, so greedy decoding is well defined."""

import os
from pathlib import Path

import pytest

from tests.gguf.conftest import GgufFiles
from tests.gguf.models import write_model


class PeakedFiles(GgufFiles):
    """As GgufFiles, of models written with the given peak."""

    def __init__(self, root: Path, peak: float):
        super().__init__(root)
        self.peak = peak

    def folder(self, model_type: str) -> Path:
        return self._once(("hf", model_type),
                          lambda: write_model(self.root / model_type, model_type, peak=self.peak))


@pytest.fixture(scope="session")
def peaked_files(tmp_path_factory) -> PeakedFiles:
    return PeakedFiles(tmp_path_factory.mktemp("gguf-peak30"), 30.0)


@pytest.fixture(scope="session")
def greedy_files(tmp_path_factory) -> PeakedFiles:
    """WISP_GGUF_DIR/peak50 when set: files made beforehand on a machine with llama.cpp (see bench/h200_quant.sh)."""
    made = os.environ.get("WISP_GGUF_DIR")
    root = Path(made) / "peak50" if made else tmp_path_factory.mktemp("gguf-peak50")
    return PeakedFiles(root, 50.0)
