"""Session-scoped tiny GGUF files: each model_type converted by engine.gguf.convert (f32, f16, q8_0) and
quantized by llama.cpp's own quantizer (Q4_K_M, Q5_K_M, Q6_K, Q8_0), built on first use, once per test run: the
fixtures' roots are run_artifact folders, which every pytest-xdist worker of the run shares."""

from pathlib import Path

import pytest

from engine.gguf.convert import convert
from tests.gguf.models import quantize, write_model
from tests.run_artifacts import made_once


class GgufFiles:
    """`folder(model_type)` the HF checkpoint; `converted(model_type, "f32")`; `quantized(model_type, "Q4_K_M")`.
    Each is made by the first process that asks; other processes given the same root wait for it and share it."""

    def __init__(self, root: Path):
        self.root = root
        self._made: dict[tuple, Path] = {}

    def folder(self, model_type: str) -> Path:
        return self._once(("hf", model_type), lambda: write_model(self.root / model_type, model_type))

    def converted(self, model_type: str, out_type: str) -> Path:
        return self._once(("gguf", model_type, out_type), lambda: convert(
            self.folder(model_type), self.root / f"{model_type}-{out_type}.gguf", out_type).path)

    def quantized(self, model_type: str, ftype: str) -> Path:
        """A file already in root is used as it is: machines without llama.cpp (the H200) get them made elsewhere."""
        out = self.root / f"{model_type}-{ftype}.gguf"
        return self._once(("quant", model_type, ftype), lambda: out if out.exists() else quantize(
            self.converted(model_type, "f32"), out, ftype))

    def _once(self, key: tuple, make) -> Path:
        if key not in self._made:
            self._made[key] = made_once(self.root, "-".join(key), make)
        return self._made[key]


@pytest.fixture(scope="session")
def gguf_files(run_artifact) -> GgufFiles:
    return GgufFiles(run_artifact("gguf-models", lambda folder: None))
