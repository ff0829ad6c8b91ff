"""The hybrid linear-attention models (llama.cpp's qwen3next and qwen35moe) on Wisp's engine against llama.cpp, on
files `wisp convert-gguf` wrote and llama.cpp's own quantizer quantized (Q8_0, Q4_K_M).

At f32 Wisp computes llama.cpp's logits (teacher-forced top-1 1.0, KL ~1e-15 nats on 512 positions), so the files'
layouts (q|k|v and z split, b|a per key head, tiled value heads, A = -exp(A_log), norm weights with their 1 added)
are read as llama.cpp reads them. On quantized files Wisp's reading is exact (its logits equal llama.cpp's on the
same file dequantized to f32); what separates the two is llama.cpp's rounding of activations before each quantized
matmul (tests/gguf/activation_quant), which these models amplify more than the others: their Gated DeltaNet
layers carry every rounding forward in the recurrent state. On the standard peaked models (peak 30, weights of
std 0.15) greedy runs part within a few tokens, so the greedy comparison uses models whose layers move the logits
less (peak 20, std 0.05), where a different context still changes most of the 32 tokens."""

import numpy as np
import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from tests.gguf.engine_logits import agreement, file_logits
from tests.gguf.models import write_model
from tests.gguf.peaked import PeakedFiles, peaked_files  # noqa: F401 (the fixture)
from tests.gguf.reference import dequantized_copy, llama_cpp_logits
from tests.tiny_models import HYBRID_TYPES

pytestmark = pytest.mark.slow  # a llama.cpp quantization and two engines per case: about a minute on 2 cores

POSITIONS = 512
TOKENS = np.random.default_rng(0).integers(3, 384, POSITIONS).tolist()
GREEDY_PEAK, GREEDY_STD = 20.0, 0.05


class CalmFiles(PeakedFiles):
    """Peaked files of models whose weights spread less (GREEDY_STD)."""

    def folder(self, model_type: str):
        return self._once(("hf", model_type), lambda: write_model(self.root / model_type, model_type,
                                                                  peak=self.peak, std=GREEDY_STD))


@pytest.fixture(scope="module")
def calm_files(tmp_path_factory) -> CalmFiles:
    return CalmFiles(tmp_path_factory.mktemp("gguf-hybrid-calm"), GREEDY_PEAK)


def wisp_logits(path, rounded: bool = False) -> np.ndarray:
    return file_logits(path, TOKENS, rounded)


def greedy(path, backend: str, prompt: list[int]) -> tuple[int, ...]:
    with Engine(EngineOptions(model=str(path), device="cpu", backend=backend, max_model_len=64)) as engine:
        return engine.generate(GenerateRequest(prompt_token_ids=tuple(prompt),
                                               sampling=SamplingParams(max_tokens=32, ignore_eos=True))).token_ids


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
def test_an_f32_file_computes_llama_cpps_logits(model_type, peaked_files):
    top1, kl = agreement(wisp_logits(peaked_files.converted(model_type, "f32")),
                         llama_cpp_logits(peaked_files.converted(model_type, "f32"), TOKENS))
    print(f"{model_type} f32: top-1 {top1:.4f} KL {kl:.2e}")
    assert top1 == 1.0 and kl < 1e-6, (top1, kl)


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
@pytest.mark.parametrize("ftype", ["f32", "Q8_0", "Q4_K_M"])
def test_the_first_32_greedy_tokens_equal_llama_cpps(model_type, ftype, calm_files):
    path = calm_files.converted(model_type, "f32") if ftype == "f32" else calm_files.quantized(model_type, ftype)
    ours = greedy(path, "wisp", TOKENS[:8])
    assert len(set(ours)) > 4 and ours == greedy(path, "llama.cpp", TOKENS[:8])
    elsewhere = greedy(path, "wisp", TOKENS[20:27] + TOKENS[7:8])  # the same last token after another context
    print(f"{model_type} {ftype}: another context changes {sum(a != b for a, b in zip(ours, elsewhere))} of 32")


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
@pytest.mark.parametrize("ftype", ["Q8_0", "Q4_K_M"])
def test_quantized_files_differ_from_llama_cpp_by_its_activation_rounding(model_type, ftype, peaked_files,
                                                                          tmp_path):
    path = peaked_files.quantized(model_type, ftype)
    theirs = llama_cpp_logits(path, TOKENS)
    ours = wisp_logits(path)
    exact_top1, exact_kl = agreement(ours, llama_cpp_logits(dequantized_copy(path, tmp_path / "f32.gguf"), TOKENS))
    top1, kl = agreement(ours, theirs)
    rounded_top1, rounded_kl = agreement(wisp_logits(path, rounded=True), theirs)
    print(f"{model_type} {ftype}: wisp top-1 {top1:.4f} KL {kl:.5f}; rounded top-1 {rounded_top1:.4f} "
          f"KL {rounded_kl:.6f}; against llama.cpp on the dequantized file top-1 {exact_top1:.4f} KL {exact_kl:.2e}")
    assert exact_top1 == 1.0 and exact_kl < 1e-6
    assert rounded_top1 >= 0.95 and rounded_kl <= 0.05
    assert rounded_kl < kl / 10
