"""Tiny gpt-oss GGUF files written by `wisp convert-gguf` (engine.model.families.gpt_oss, llama.cpp's converter's
layout): f32, then llama.cpp's quantizer makes MXFP4_MOE (MXFP4 experts, Q8_0 elsewhere); and the file of an MXFP4
checkpoint, whose experts' blocks are repacked as they are. The checkpoints: tests/gguf/models' peaked gpt_oss,
rows of whole MXFP4 blocks, llama.cpp's fixed SwiGLU constants, and YaRN truncated as ggml computes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.gguf.convert import convert
from tests.gguf.conftest import GgufFiles
from tests.gguf.models import quantize, write_model
from tests.quant.mxfp4_models import write_mxfp4_pair

MODEL_TYPE = "gpt_oss"


class GptOssFiles(GgufFiles):
    """folder(): the peaked checkpoint; converted(): its f32 file; quantized(): llama.cpp's MXFP4_MOE of it;
    mxfp4_pair(): (the checkpoint with MXFP4 experts, the same model dense); repacked(): the MXFP4 one's file."""

    def __init__(self, root: Path, peak: float):
        super().__init__(root)
        self.peak = peak

    def folder(self, model_type: str = MODEL_TYPE) -> Path:
        return self._once(("hf", model_type), lambda: write_model(self.root / model_type, model_type, peak=self.peak))

    def converted(self, model_type: str = MODEL_TYPE, out_type: str = "f32") -> Path:
        return super().converted(model_type, out_type)

    def quantized(self, model_type: str = MODEL_TYPE, ftype: str = "MXFP4_MOE") -> Path:
        return super().quantized(model_type, ftype)

    def mxfp4_pair(self) -> tuple[Path, Path]:
        return self._once(("pair",), lambda: write_mxfp4_pair(self.folder(), self.root / "mxfp4",
                                                             self.root / "mxfp4-dense"))

    def repacked(self) -> Path:
        return self._once(("repacked",), lambda: convert(self.mxfp4_pair()[0], self.root / "repacked.gguf",
                                                         "f32").path)


@pytest.fixture(scope="session")
def gpt_oss_files(run_artifact) -> GptOssFiles:
    return GptOssFiles(run_artifact("gguf-gpt-oss", lambda folder: None), 30.0)


@pytest.fixture(scope="session")
def gpt_oss_greedy_files(run_artifact) -> GptOssFiles:
    return GptOssFiles(run_artifact("gguf-gpt-oss-50", lambda folder: None), 50.0)
