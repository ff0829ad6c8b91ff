"""Tiny GGUF files of peaked models (tests/gguf/models.write_model's `peak`): on these another implementation's
rounding (llama.cpp's activation quantization, bf16 on a GPU) moves logits far less than their margins.
`peaked_files` (peak 30): attention and the experts still move the logits a lot (teacher-forced comparisons);
`greedy_files` (peak 50): every greedy step of 32 has a clear winner, so greedy decoding is well defined.
GLM-4.5's routed experts are scaled by 2.5 and a shared expert adds to them, so its MoE output outweighs embeddings
scaled by 50 (the fp32 run's first greedy token had a logprob of -0.71 and bf16 picked another): greedy_files
writes it at GREEDY_PEAKS' peak."""

import os
from pathlib import Path

import pytest

from tests.gguf.conftest import GgufFiles
from tests.gguf.models import write_model


GREEDY_PEAKS = {"glm4_moe": 150.0}


class PeakedFiles(GgufFiles):
    """As GgufFiles, of models written with the given peak (peaks: another for some model types)."""

    def __init__(self, root: Path, peak: float, peaks: dict[str, float] | None = None):
        super().__init__(root)
        self.peak, self.peaks = peak, peaks or {}

    def folder(self, model_type: str) -> Path:
        peak = self.peaks.get(model_type, self.peak)
        return self._once(("hf", model_type), lambda: write_model(self.root / model_type, model_type, peak=peak))


@pytest.fixture(scope="session")
def peaked_files(run_artifact) -> PeakedFiles:
    return PeakedFiles(run_artifact("gguf-peak30", lambda folder: None), 30.0)


@pytest.fixture(scope="session")
def greedy_files(run_artifact) -> PeakedFiles:
    """WISP_GGUF_DIR/peak50 when set: files made beforehand on a machine with llama.cpp (see bench/h200_quant.sh)."""
    made = os.environ.get("WISP_GGUF_DIR")
    root = Path(made) / "peak50" if made else run_artifact("gguf-peak50", lambda folder: None)
    return PeakedFiles(root, 50.0, GREEDY_PEAKS)
