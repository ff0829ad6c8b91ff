"""The block format a Hugging Face checkpoint stores its experts in, from config.json's `quantization_config`
(no torch: the catalog and the app read configs)."""

from __future__ import annotations

from engine.errors import UnsupportedModelError

MXFP4 = "MXFP4"  # engine.quant.types.MXFP4's name: gpt-oss publishes its experts so


def expert_quant(config: dict) -> str:
    """"MXFP4" for a checkpoint whose experts are stored MXFP4 (quant_method "mxfp4"), "" for a dense one;
    refuses any other quantization by name (its tensors are not weights Wisp's loader can read)."""
    quantization = config.get("quantization_config")
    if quantization is None:
        return ""
    method = quantization.get("quant_method") if isinstance(quantization, dict) else None
    if method == "mxfp4":
        return MXFP4
    raise UnsupportedModelError(f"config.json: quantization '{method}' is not supported by Wisp's engine (it loads "
                                "dense checkpoints and gpt-oss's MXFP4 experts)")
