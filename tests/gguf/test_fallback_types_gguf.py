"""Files whose rows are not whole 256-element super-blocks, as Gemma 4 26B-A4B's (expert rows of 704) and Nemotron 3
Nano's (a hidden size of 2688) are: llama.cpp's quantizer stores those tensors in its 32-element fallback types
(Q5_0 in a Q4_K_M file, Q5_1 in a Q5_K_M one, Q8_0 for Q6_K). A tiny qwen3_moe with a hidden size of 288 and experts
of 96 (9 and 3 blocks of 32), quantized by llama.cpp: Wisp's engine runs it, computes llama.cpp's logits for its
weights, and gives the same bits in every expert mode."""

import numpy as np
import pytest

from engine.gguf.model_file import GgufModel
from tests.gguf.engine_logits import file_logits
from tests.gguf.engine_runs import mode_options, outputs
from tests.gguf.models import quantize, write_model
from tests.gguf.reference import dequantized_copy, llama_cpp_logits

pytest.importorskip("llama_cpp", reason="llama.cpp's quantizer makes the files")
SHAPE = dict(hidden_size=288, moe_intermediate_size=96)
TOKENS = np.random.default_rng(0).integers(3, 384, 64).tolist()
FALLBACK = {"Q4_K_M": "Q5_0", "Q5_K_M": "Q5_1"}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, object]:
    """{file type: path} of the model quantized by llama.cpp, from one f32 conversion."""
    from engine.gguf.convert import convert

    root = tmp_path_factory.mktemp("fallback")
    folder = write_model(root / "qwen3_moe-288", "qwen3_moe", **SHAPE)
    f32 = convert(folder, root / "f32.gguf", "f32").path
    return {ftype: quantize(f32, root / f"{ftype}.gguf", ftype) for ftype in FALLBACK}


@pytest.mark.parametrize("ftype", FALLBACK)
def test_the_file_holds_fallback_types_and_runs_on_wisp(files, ftype):
    model = GgufModel(files[ftype])
    types = model.tensor_types()
    assert types["blk.0.ffn_gate_exps.weight"] == types["blk.0.ffn_up_exps.weight"] == FALLBACK[ftype]
    assert {types["blk.0.ffn_down_exps.weight"], types["blk.1.ffn_down_exps.weight"]} <= {FALLBACK[ftype], "Q8_0"}
    assert types["blk.0.attn_q.weight"] == FALLBACK[ftype]  # dense rows of 288 too
    assert model.support()[0]


@pytest.mark.parametrize("ftype", FALLBACK)
def test_the_file_reads_as_llama_cpp_computes_its_weights(files, ftype, tmp_path):
    path = files[ftype]
    theirs = llama_cpp_logits(dequantized_copy(path, tmp_path / "dequantized.gguf"), TOKENS)
    ours = file_logits(path, TOKENS)
    assert np.abs(ours - theirs).max() < 1e-3 * np.abs(theirs).max()
    assert (ours.argmax(-1) == theirs.argmax(-1)).all()


def test_every_expert_mode_is_bitwise_resident(files):
    path = files["Q4_K_M"]
    reference = outputs(path, experts="resident")
    assert len({ids for ids, _ in reference}) > 1
    for name, options in mode_options(path, dtype_bytes=4).items():
        assert outputs(path, **options) == reference, name
