"""Draft (MTP) layers in GGUF files, as llama.cpp's converter writes them (blk.{n}.nextn.*, block_count n + 1,
`{arch}.nextn_predict_layers` 1): `wisp convert-gguf` writes a glm4_moe (nextn), qwen3_5_moe or qwen3_next (mtp.*)
checkpoint's draft layer so, llama.cpp still loads the file and computes the model's logits, `--speculative mtp` on
the file drafts from that layer (the checkpoint's weights in the file's layout, greedy ids identical to off), and a
file without one is one line and status 2 (auto: prompt lookup)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.cli import main
from engine.gguf.convert import convert
from engine.gguf.draft_layer import GgufDraftTensors
from engine.gguf.model_file import GgufModel
from engine.model.families import family
from engine.model.hybrid_layers import ZeroCenteredRMSNorm
from engine.model.loader import read_args
from engine.model.mtp import DraftLayer
from engine.model.mtp_loader import CheckpointDraftTensors
from tests.gguf.engine_logits import agreement, file_logits
from tests.gguf.reference import llama_cpp_logits
from tests.mtp_checkpoints import write_mtp_model

PROMPTS = ["def add(a, b):\n    return a + b\n", "one two three one two", "héllo wörld"]
GREEDY = SamplingParams(max_tokens=24, ignore_eos=True)
RUN = ["--prompt", "def fib(n):", "--max-tokens", "8", "--device", "cpu", "--json"]
ARCHS = {"glm4_moe": "glm4moe", "qwen3_5_moe": "qwen35moe", "qwen3_next": "qwen3next"}


@pytest.fixture(scope="module")
def nextn_files(gguf_files, tmp_path_factory):
    """(model_type, copying) -> (the checkpoint with a draft layer, its f32 GGUF)."""
    made = {}

    def get(model_type: str, copying: bool):
        if (model_type, copying) not in made:
            root = tmp_path_factory.mktemp(f"nextn-{model_type}")
            folder = write_mtp_model(gguf_files.folder(model_type), root / "hf", model_type, copying)
            made[model_type, copying] = folder, convert(folder, root / "mtp.gguf", "f32").path
        return made[model_type, copying]

    return get


def run(model, **options):
    with Engine(EngineOptions(model=str(model), device="cpu", **options)) as engine:
        results = [h.result() for h in engine.submit_batch([GenerateRequest(prompt=p, sampling=GREEDY)
                                                            for p in PROMPTS])]
        assert engine.has_draft_layers
    assert all(r.error is None for r in results), [r.error for r in results]
    return ([(list(r.token_ids), list(r.logprobs)) for r in results], sum(r.stats.spec_proposed for r in results),
            sum(r.stats.spec_accepted for r in results))


@pytest.mark.parametrize("model_type", ARCHS)
def test_the_converter_writes_the_draft_layer_as_llama_cpps_nextn_block(nextn_files, model_type):
    _, path = nextn_files(model_type, False)
    model, arch = GgufModel(path), ARCHS[model_type]
    n = model.args.num_hidden_layers
    assert model.file.get(f"{arch}.block_count") == n + 1 and model.file.get(f"{arch}.nextn_predict_layers") == 1
    for name in ("nextn.eh_proj", "nextn.enorm", "nextn.hnorm", "nextn.shared_head_norm", "attn_q", "attn_norm",
                 "ffn_gate_inp", "ffn_gate_exps", "ffn_down_exps", "ffn_down_shexp"):
        assert f"blk.{n}.{name}.weight" in model.file.tensors, name
    assert model.support()[0]
    tokens = np.random.default_rng(0).integers(3, 384, 64).tolist()  # llama.cpp loads it: the model's logits
    top1, kl = agreement(file_logits(path, tokens, False), llama_cpp_logits(path, tokens))
    assert top1 == 1.0 and kl < 1e-6, (top1, kl)


@pytest.mark.parametrize("model_type", ARCHS)
def test_the_files_draft_layer_is_the_checkpoints(nextn_files, model_type):
    """f32: every draft-layer tensor read from the file is the checkpoint's, a zero-centred norm's with its 1
    added (the file's layout, which the layer built from the file's args reads)."""
    folder, path = nextn_files(model_type, False)
    model, known = GgufModel(path), family(model_type)
    ours = GgufDraftTensors(model)
    theirs = CheckpointDraftTensors(folder, read_args(folder), known.weight_names, known.draft_layer)
    assert ours.has_layer() and ours.has_head() == theirs.has_head()
    with torch.device("meta"):
        layer = DraftLayer(model.args, known.draft_layer, has_head=ours.has_head())
    centred = {f"{prefix}.weight" for prefix, module in layer.named_modules()
               if isinstance(module, ZeroCenteredRMSNorm)}
    assert centred or model_type == "glm4_moe"
    for param, value in layer.named_parameters():
        shape = tuple(value.shape)
        expected = theirs.dense(param, shape).float() + (1.0 if param in centred else 0.0)
        assert torch.equal(ours.dense(param, shape), expected), param
    for expert, (a, b) in enumerate(zip(ours.experts(), theirs.experts(), strict=True)):
        assert all(torch.equal(x, y.float()) for x, y in zip(a, b)), expert


@pytest.mark.parametrize("copying", [False, True], ids=["random", "copying"])
@pytest.mark.parametrize("model_type", ARCHS)
def test_mtp_on_the_file_is_lossless(nextn_files, model_type, copying):
    _, path = nextn_files(model_type, copying)
    plain, proposed, _ = run(path)
    assert proposed == 0
    drafted, proposed, accepted = run(path, speculative="mtp")
    for (ids, logprobs), (plain_ids, plain_logprobs) in zip(drafted, plain, strict=True):
        assert ids == plain_ids
        assert logprobs == pytest.approx(plain_logprobs, abs=1e-4)
    assert proposed > 0
    if copying:
        assert accepted >= 0.8 * proposed
    else:
        assert accepted <= proposed // 4


def test_a_file_without_a_draft_layer_is_one_line_and_status_2(gguf_files, capsys):
    capsys.readouterr()
    for model_type in ("glm4_moe", "qwen3_moe"):  # converted from a checkpoint without one; a family without one
        path = str(gguf_files.converted(model_type, "f32"))
        assert main(["run", path, *RUN, "--speculative", "mtp"]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1, captured.err
        assert "has no draft (MTP) layers" in captured.err
    assert main(["run", str(gguf_files.converted("glm4_moe", "f32")), *RUN, "--speculative", "auto"]) == 0
    assert json.loads(capsys.readouterr().out)["token_ids"]
