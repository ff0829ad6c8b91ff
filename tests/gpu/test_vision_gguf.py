"""Images from a GGUF file and its mmproj tower on CUDA: `pytest -m gpu tests/gpu/test_vision_gguf.py`; fails (not
skips) without a GPU. The tiny qwen3_5_moe and gemma4 vision-language checkpoints written by `wisp convert-gguf --type
f32 --mmproj` (projectors qwen3vl_merger and gemma4v): the tower reads back as the checkpoint's (the same embeddings,
fp32); in bf16 token ids and logprobs are bitwise identical in every expert mode, with a text stream batched beside;
the tower sits on the device in the compute dtype."""

from __future__ import annotations

import io

import pytest
import torch
from PIL import Image

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.cli import main
from engine.gguf.mmproj_tower import load_mmproj_vision
from engine.text.tokenizer import Tokenizer
from engine.vision.gemma4_preprocess import gemma4_preprocess
from engine.vision.gemma4_vision_model import Gemma4VisionModel
from engine.vision.load_tower import load_vision
from engine.vision.preprocess import preprocess
from tests.experts.test_expert_modes import mode_options
from tests.tiny_models import VOCAB
from tests.vision.test_vl_tokens import CONVERSATIONS
from tests.vision.tiny_gemma4 import write_tiny_gemma4_vl
from tests.vision.tiny_vl import encoded_image, write_tiny_vl

pytestmark = pytest.mark.gpu
GREEDY = SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True)
CHECKPOINTS = {"qwen3_5_moe": write_tiny_vl, "gemma4": write_tiny_gemma4_vl}


@pytest.fixture(scope="module", params=list(CHECKPOINTS))
def vl_files(request, tmp_path_factory):
    """(the checkpoint folder, its model.gguf with mmproj-tiny.gguf beside it)."""
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    folder = CHECKPOINTS[request.param](tmp_path_factory.mktemp(f"tiny_{request.param}_cuda"))
    model = tmp_path_factory.mktemp(f"gguf_{request.param}_cuda") / "model.gguf"
    assert main(["convert-gguf", str(folder), str(model), "--type", "f32", "--mmproj",
                 str(model.parent / "mmproj-tiny.gguf")]) == 0
    return folder, model


def outputs(model, dtype: str, conversations, **options):
    with Engine(EngineOptions(model=str(model), device="cuda", dtype=dtype, **options)) as engine:
        assert engine.sees_images
        handles = [engine.submit(GenerateRequest(messages=tuple(m), sampling=GREEDY)) for m in conversations]
        finishes = [handle.result() for handle in handles]
    assert all(f.reason == "length" for f in finishes), [f.error for f in finishes]
    return [(f.token_ids, f.logprobs) for f in finishes]


def test_the_mmproj_towers_embeddings_equal_the_checkpoint_towers_on_cuda(vl_files):
    folder, model = vl_files
    cuda = torch.device("cuda")
    tokenizer = Tokenizer.from_folder(folder)
    checkpoint = load_vision(folder, cuda, torch.float32, vocab_size=VOCAB)
    mmproj = load_mmproj_vision(model.parent / "mmproj-tiny.gguf", model, 64, tokenizer.token_to_id, cuda,
                                torch.float32)
    pixels, grid = tower_input(mmproj, encoded_image(90, 60, 4))
    with torch.inference_mode():
        ours = mmproj.tower(torch.from_numpy(pixels).to(cuda), [grid])
        theirs = checkpoint.tower(torch.from_numpy(pixels).to(cuda), [grid])
    assert torch.equal(ours, theirs)


def tower_input(vision, data: bytes):
    """(pixels, grid) of one image as the tower takes them."""
    image = Image.open(io.BytesIO(data))
    if isinstance(vision, Gemma4VisionModel):
        patches, positions = gemma4_preprocess(image, vision.processing)
        return patches, (1, int(positions[:, 1].max()) + 1, int(positions[:, 0].max()) + 1)
    return preprocess(image, vision.processing)


def test_bf16_bitwise_across_expert_modes_with_a_text_stream_beside(vl_files):
    _, model = vl_files
    batch = [*CONVERSATIONS.values(), [{"role": "user", "content": "def fib(n):"}]]
    reference = outputs(model, "bfloat16", batch)
    for name, options in mode_options(top_k=2, num_experts=8).items():
        assert outputs(model, "bfloat16", batch, **options) == reference, name


def test_the_mmproj_tower_runs_in_the_compute_dtype_on_the_device(vl_files):
    _, model = vl_files
    with Engine(EngineOptions(model=str(model), device="cuda", dtype="bfloat16")) as engine:
        tower = engine._core.runner.vision.tower
        assert {p.dtype for p in tower.parameters()} == {torch.bfloat16}
        assert {p.device.type for p in tower.parameters()} == {"cuda"}
