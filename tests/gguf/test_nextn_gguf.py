"""Draft (MTP) layers in GGUF files, as llama.cpp's converter writes them (blk.{n}.nextn.*, block_count n + 1,
`{arch}.nextn_predict_layers` 1): `wisp convert-gguf` writes a glm4_moe checkpoint's draft layer so, llama.cpp still
loads the file and computes the model's logits, `--speculative mtp` on the file drafts from that layer (the same
weights as the checkpoint's, greedy ids identical to off), and a file without one, or of a family whose GGUF has
none Wisp reads, is one line and status 2."""

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
from engine.model.mtp import DraftLayer
from engine.model.mtp_loader import CheckpointDraftTensors
from engine.model.mtp_names import NEXTN
from tests.gguf.engine_logits import agreement, file_logits
from tests.gguf.reference import llama_cpp_logits
from tests.mtp_checkpoints import write_mtp_model

PROMPTS = ["def add(a, b):\n    return a + b\n", "one two three one two", "héllo wörld"]
GREEDY = SamplingParams(max_tokens=24, ignore_eos=True)
RUN = ["--prompt", "def fib(n):", "--max-tokens", "8", "--device", "cpu", "--json"]


@pytest.fixture(scope="module")
def nextn_files(gguf_files, tmp_path_factory):
    """copying -> (the glm4_moe checkpoint with a draft layer, its f32 GGUF)."""
    made = {}

    def get(copying: bool):
        if copying not in made:
            root = tmp_path_factory.mktemp("nextn")
            folder = write_mtp_model(gguf_files.folder("glm4_moe"), root / "hf", "glm4_moe", copying)
            made[copying] = folder, convert(folder, root / "mtp.gguf", "f32").path
        return made[copying]

    return get


def run(model, **options):
    with Engine(EngineOptions(model=str(model), device="cpu", **options)) as engine:
        results = [h.result() for h in engine.submit_batch([GenerateRequest(prompt=p, sampling=GREEDY)
                                                            for p in PROMPTS])]
        assert engine.has_draft_layers
    assert all(r.error is None for r in results), [r.error for r in results]
    return ([(list(r.token_ids), list(r.logprobs)) for r in results], sum(r.stats.spec_proposed for r in results),
            sum(r.stats.spec_accepted for r in results))


def test_the_converter_writes_the_draft_layer_as_llama_cpps_nextn_block(nextn_files):
    folder, path = nextn_files(False)
    model = GgufModel(path)
    n = model.args.num_hidden_layers
    assert model.file.get("glm4moe.block_count") == n + 1 and model.file.get("glm4moe.nextn_predict_layers") == 1
    for name in ("nextn.eh_proj", "nextn.enorm", "nextn.hnorm", "nextn.shared_head_norm", "attn_q", "ffn_gate_inp",
                 "ffn_gate_exps", "ffn_down_shexp"):
        assert f"blk.{n}.{name}.weight" in model.file.tensors, name
    assert model.support()[0]
    tokens = np.random.default_rng(0).integers(3, 384, 64).tolist()  # llama.cpp loads it: the model's logits
    top1, kl = agreement(file_logits(path, tokens, False), llama_cpp_logits(path, tokens))
    assert top1 == 1.0 and kl < 1e-6, (top1, kl)


def test_the_files_draft_layer_is_the_checkpoints(nextn_files):
    """f32: every draft-layer tensor read from the file equals the checkpoint's."""
    folder, path = nextn_files(False)
    model = GgufModel(path)
    args = model.args
    ours, theirs = GgufDraftTensors(model), CheckpointDraftTensors(folder, args, family("glm4_moe").weight_names,
                                                                    NEXTN)
    assert ours.has_layer() and ours.has_head() == theirs.has_head()
    with torch.device("meta"):
        layer = DraftLayer(args, NEXTN, has_head=ours.has_head())
    for param, value in layer.named_parameters():
        shape = tuple(value.shape)
        assert torch.equal(ours.dense(param, shape), theirs.dense(param, shape).float()), param
    for expert, (a, b) in enumerate(zip(ours.experts(), theirs.experts(), strict=True)):
        assert all(torch.equal(x, y.float()) for x, y in zip(a, b)), expert


@pytest.mark.parametrize("copying", [False, True], ids=["random", "copying"])
def test_mtp_on_the_file_is_lossless(nextn_files, copying):
    _, path = nextn_files(copying)
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
    for model_type, says in (("glm4_moe", "has no draft (MTP) layers"),
                             ("qwen3_5_moe", "whose draft (MTP) layer Wisp does not read from GGUF")):
        path = str(gguf_files.converted(model_type, "f32"))
        assert main(["run", path, *RUN, "--speculative", "mtp"]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1 and says in captured.err, captured.err
    assert main(["run", str(gguf_files.converted("glm4_moe", "f32")), *RUN, "--speculative", "auto"]) == 0
    assert json.loads(capsys.readouterr().out)["token_ids"]
