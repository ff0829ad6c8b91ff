"""Tiny qwen3_moe and glm4_moe checkpoints as Q4_K_M GGUF files made by llama.cpp's own quantizer (rows of 256 so
the k-quant types are used), for GPU smoke runs: python bench/tiny_gguf.py OUT_DIR."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.gguf.convert import convert  # noqa: E402
from tests.gguf.models import quantize, write_model  # noqa: E402


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for model_type in ("qwen3_moe", "glm4_moe"):
        folder = write_model(out / model_type, model_type)
        f32 = convert(folder, out / f"{model_type}-f32.gguf", "f32").path
        print(quantize(f32, out / f"{model_type}-Q4_K_M.gguf", "Q4_K_M"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
