"""A GGUF model file and its vision tower's mmproj file (llama.cpp's `clip` file, written by `wisp convert-gguf
--mmproj`), for Qwen3.5's tower (projector qwen3vl_merger) and Gemma 4's (gemma4v): the tower found beside the model
or named with --mmproj gives the safetensors checkpoint's greedy tokens and logprobs for image+text prompts (CPU,
fp32); Qwen3-VL's tower (deepstack mergers) and Gemma 4's with clipped linears and standardisation read back bit for
bit; a file that is not an mmproj, one made for another model or another hidden size, is refused with the file
named."""

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file, save_file

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams, engine_plan
from engine.errors import ModelFormatError, RequestError, UnsupportedModelError
from engine.gguf.mmproj_tower import load_mmproj_vision
from engine.gguf.mmproj_writer import write_mmproj
from engine.text.tokenizer import Tokenizer
from engine.vision.gemma4_preprocess import gemma4_preprocess
from engine.vision.load_tower import load_vision
from engine.vision.preprocess import preprocess
from tests.tiny_models import VOCAB
from tests.vision.test_gemma4_vision import wisp_outputs
from tests.vision.test_vl_tokens import CONVERSATIONS
from tests.vision.tiny_vl import encoded_image

PAIRS = {"qwen3_5_moe": ("tiny_vl_dir", "tiny_vl_gguf"), "gemma4": ("tiny_gemma4_dir", "tiny_gemma4_gguf")}
MMPROJ = "mmproj-tiny-f32.gguf"  # beside each model.gguf (tests/vision/conftest.py)


@pytest.fixture(params=list(PAIRS))
def pair(request):
    """(the checkpoint folder, its model.gguf with the mmproj file beside it)."""
    return tuple(request.getfixturevalue(name) for name in PAIRS[request.param])


@pytest.mark.parametrize("name", ["one image", "two images then text", "text, image, text"])
def test_gguf_with_the_mmproj_beside_it_gives_the_checkpoints_tokens_and_logprobs(pair, name):
    folder, model = pair
    tokens, logprobs = wisp_outputs(model, CONVERSATIONS[name])
    reference_tokens, reference_logprobs = wisp_outputs(folder, CONVERSATIONS[name])
    assert tokens == reference_tokens
    assert logprobs == pytest.approx(reference_logprobs, abs=1e-4)


def test_mmproj_named_with_the_option_is_the_one_loaded(pair, tmp_path):
    """The model alone in its folder: no tower until --mmproj names one."""
    folder, gguf = pair
    model = tmp_path / "model.gguf"
    shutil.copy(gguf, model)
    with Engine(EngineOptions(model=str(model), device="cpu", dtype="float32")) as engine:
        assert not engine.sees_images
    messages = CONVERSATIONS["one image"]
    tokens, logprobs = wisp_outputs(model, messages, mmproj=str(gguf.parent / MMPROJ))
    reference_tokens, reference_logprobs = wisp_outputs(folder, messages)
    assert tokens == reference_tokens and logprobs == pytest.approx(reference_logprobs, abs=1e-4)


def test_the_plan_counts_the_tower(pair, tmp_path):
    _, gguf = pair
    alone = tmp_path / "model.gguf"
    shutil.copy(gguf, alone)
    with_tower = engine_plan(EngineOptions(model=str(gguf), device="cpu", dtype="float32"))
    without = engine_plan(EngineOptions(model=str(alone), device="cpu", dtype="float32"))
    assert with_tower.dense_bytes > without.dense_bytes


def test_qwen3_vl_tower_reads_back_bit_for_bit_with_its_deepstack_mergers(tiny_vl_moe_dir, tmp_path):
    mmproj = tmp_path / "mmproj-vl-moe.gguf"
    write_mmproj(tiny_vl_moe_dir, mmproj, "f32")
    cpu = torch.device("cpu")
    reference = load_vision(tiny_vl_moe_dir, cpu, torch.float32, vocab_size=300)
    tokenizer = Tokenizer.from_folder(tiny_vl_moe_dir)
    tower = load_mmproj_vision(mmproj, tiny_vl_moe_dir / "model.gguf", 64, tokenizer.token_to_id, cpu, torch.float32)
    assert tower.args == reference.args and tower.args.deepstack_visual_indexes == (0, 2)
    assert tower.processing == reference.processing
    pixels, grid = preprocess(Image.open(io.BytesIO(encoded_image(90, 60, 4))), tower.processing)
    with torch.inference_mode():
        ours = tower.tower(torch.from_numpy(pixels), [grid])
        theirs = reference.tower(torch.from_numpy(pixels), [grid])
    assert ours.shape[1] == 3 and torch.equal(ours, theirs)


def test_gemma4_tower_reads_back_bit_for_bit_with_clipped_linears_and_standardisation(tiny_gemma4_dir, tmp_path):
    folder = clipped_and_standardised(tiny_gemma4_dir, tmp_path / "clipped")
    mmproj = tmp_path / "mmproj-gemma4.gguf"
    write_mmproj(folder, mmproj, "f32")
    cpu = torch.device("cpu")
    reference = load_vision(folder, cpu, torch.float32, vocab_size=VOCAB)
    tokenizer = Tokenizer.from_folder(folder)
    tower = load_mmproj_vision(mmproj, folder / "model.gguf", 64, tokenizer.token_to_id, cpu, torch.float32)
    assert tower.args == reference.args and tower.args.use_clipped_linears and tower.args.standardize
    assert tower.processing == reference.processing
    assert (tower.boi_token_id, tower.eoi_token_id, tower.is_bidirectional) == (4, 5, True)
    patches, positions = gemma4_preprocess(Image.open(io.BytesIO(encoded_image(150, 90, 4))), tower.processing)
    grid = (1, int(positions[:, 1].max()) + 1, int(positions[:, 0].max()) + 1)
    with torch.inference_mode():
        ours = tower.tower(torch.from_numpy(patches), [grid])
        theirs = reference.tower(torch.from_numpy(patches), [grid])
        unclipped = load_vision(tiny_gemma4_dir, cpu, torch.float32, vocab_size=VOCAB).tower(
            torch.from_numpy(patches), [grid])
    assert torch.equal(ours, theirs) and not torch.allclose(ours, unclipped, atol=1e-3)


def clipped_and_standardised(source, folder):
    """A copy of the tiny gemma4 checkpoint whose tower clamps each linear's input and output to random bounds and
    standardises the pooled features (use_clipped_linears, standardize: tensors transformers' tiny model lacks)."""
    shutil.copytree(source, folder)
    config = json.loads((folder / "config.json").read_text())
    config["vision_config"].update(use_clipped_linears=True, standardize=True)
    (folder / "config.json").write_text(json.dumps(config))
    tensors = load_file(folder / "model.safetensors")
    generator = torch.Generator().manual_seed(0)
    linears = [name.removesuffix(".linear.weight") for name in tensors
               if name.startswith("model.vision_tower.") and name.endswith(".linear.weight")]
    for linear in linears:
        for bound, sign in (("min", -1), ("max", 1)):
            for side in ("input", "output"):
                tensors[f"{linear}.{side}_{bound}"] = sign * (0.5 + torch.rand((), generator=generator))
    hidden = config["vision_config"]["hidden_size"]
    tensors["model.vision_tower.std_bias"] = torch.randn(hidden, generator=generator)
    tensors["model.vision_tower.std_scale"] = 1 + 0.1 * torch.randn(hidden, generator=generator)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def test_a_model_file_given_as_mmproj_is_refused_naming_it(pair):
    _, gguf = pair
    with pytest.raises(ModelFormatError, match="not an mmproj file") as caught:
        Engine(EngineOptions(model=str(gguf), device="cpu", dtype="float32", mmproj=str(gguf)))
    assert str(gguf) in str(caught.value)


def test_a_tower_for_another_hidden_size_is_refused_naming_it(pair, tmp_path):
    _, gguf = pair
    mmproj = tmp_path / "mmproj-other.gguf"
    with_key(gguf.parent / MMPROJ, mmproj, "clip.vision.projection_dim", 48)
    with pytest.raises(ModelFormatError, match="hidden size 48.*hidden size 64") as caught:
        Engine(EngineOptions(model=str(gguf), device="cpu", dtype="float32", mmproj=str(mmproj)))
    assert str(mmproj) in str(caught.value)


@pytest.mark.parametrize("model, tower, match", [
    ("tiny_gemma4_gguf", "tiny_vl_gguf", "Qwen3-VL and Qwen3.5's vision tower.*takes Gemma 4's"),
    ("tiny_vl_gguf", "tiny_gemma4_gguf", "Gemma 4's vision tower.*takes Qwen3-VL and Qwen3.5's")])
def test_another_models_tower_is_refused_naming_it(request, model, tower, match):
    model, mmproj = request.getfixturevalue(model), request.getfixturevalue(tower).parent / MMPROJ
    with pytest.raises(ModelFormatError, match=match) as caught:
        Engine(EngineOptions(model=str(model), device="cpu", dtype="float32", mmproj=str(mmproj)))
    assert str(mmproj) in str(caught.value) and "\n" not in str(caught.value)


def test_a_gemma4_tower_of_another_token_budget_is_refused_naming_it(tiny_gemma4_gguf, tmp_path):
    mmproj = tmp_path / "mmproj-budget.gguf"
    with_key(tiny_gemma4_gguf.parent / MMPROJ, mmproj, "clip.vision.image_max_pixels", 100 * 48 * 48)
    with pytest.raises(ModelFormatError, match="100 image tokens, not one of Gemma 4's budgets") as caught:
        Engine(EngineOptions(model=str(tiny_gemma4_gguf), device="cpu", dtype="float32", mmproj=str(mmproj)))
    assert str(mmproj) in str(caught.value)


def test_a_gemma4_tower_with_tensors_wisp_does_not_compute_is_refused_naming_it(tiny_gemma4_gguf, tmp_path):
    mmproj = tmp_path / "mmproj-out-scale.gguf"
    out_scale = ("v.blk.0.out_scale.weight", np.ones(1, np.float32))  # a per-layer scale Wisp's tower lacks
    with_key(tiny_gemma4_gguf.parent / MMPROJ, mmproj, extra_tensor=out_scale)
    with pytest.raises(UnsupportedModelError, match="does not compute .v.blk.0.out_scale.weight") as caught:
        Engine(EngineOptions(model=str(tiny_gemma4_gguf), device="cpu", dtype="float32", mmproj=str(mmproj)))
    assert str(mmproj) in str(caught.value)


def test_mmproj_for_a_safetensors_folder_is_refused(tiny_vl_dir, tiny_vl_gguf):
    with pytest.raises(RequestError, match="--mmproj pairs a vision tower with a .gguf"):
        Engine(EngineOptions(model=str(tiny_vl_dir), device="cpu", dtype="float32",
                             mmproj=str(tiny_vl_gguf.parent / MMPROJ)))


def test_the_picker_pairs_the_model_with_its_tower(pair):
    from engine.loading.catalog import folder_entries

    folder, gguf = pair
    entries = folder_entries(gguf.parent)
    assert [entry.path for entry in entries] == [str(gguf)]
    assert entries[0].sees_images and entries[0].mmproj == str(gguf.parent / MMPROJ)
    assert folder_entries(folder)[0].sees_images


def test_a_folder_of_two_models_pairs_each_with_its_own_tower(tiny_vl_gguf, tiny_gemma4_gguf, tmp_path):
    """mmproj-a (Gemma 4's) sorts before mmproj-b (Qwen's): the Qwen model takes mmproj-b, not the first by name;
    a model beside only another model's tower takes none and loads without images instead of failing."""
    from engine.loading.catalog import folder_entries

    shutil.copy(tiny_vl_gguf, tmp_path / "qwen.gguf")
    shutil.copy(tiny_gemma4_gguf, tmp_path / "gemma.gguf")
    shutil.copy(tiny_gemma4_gguf.parent / MMPROJ, tmp_path / "mmproj-a-gemma.gguf")
    shutil.copy(tiny_vl_gguf.parent / MMPROJ, tmp_path / "mmproj-b-qwen.gguf")
    towers = {Path(entry.path).name: entry.mmproj and Path(entry.mmproj).name for entry in folder_entries(tmp_path)}
    assert towers == {"gemma.gguf": "mmproj-a-gemma.gguf", "qwen.gguf": "mmproj-b-qwen.gguf"}
    (tmp_path / "mmproj-b-qwen.gguf").unlink()
    entries = {Path(entry.path).name: entry for entry in folder_entries(tmp_path)}
    assert not entries["qwen.gguf"].sees_images and entries["gemma.gguf"].sees_images
    with Engine(EngineOptions(model=str(tmp_path / "qwen.gguf"), device="cpu", dtype="float32")) as engine:
        assert not engine.sees_images


def with_key(source, target, key: str = "", value: int = 0, extra_tensor: tuple | None = None) -> None:
    """A copy of a GGUF file with one integer key changed, or one (name, array) tensor added."""
    import gguf

    reader = gguf.GGUFReader(source)
    writer = gguf.GGUFWriter(target, reader.get_field("general.architecture").contents())
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        sub_type = field.types[1] if len(field.types) > 1 else None
        writer.add_key_value(name, value if name == key else field.contents(), field.types[0], sub_type)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, np.array(tensor.data), raw_dtype=tensor.tensor_type)
    if extra_tensor is not None:
        writer.add_tensor(*extra_tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_wisp_run_takes_the_mmproj_option(pair, tmp_path, capsys):
    from engine.cli import main

    folder, gguf = pair
    model, picture = tmp_path / "model.gguf", tmp_path / "a.png"
    shutil.copy(gguf, model)
    picture.write_bytes(encoded_image(70, 50, 1))
    assert main(["run", str(model), "--mmproj", str(gguf.parent / MMPROJ), "--device", "cpu",
                 "--dtype", "float32", "--max-tokens", "8", "--temperature", "0", "--chat",
                 "--image", str(picture), "--prompt", "def fib(n):", "--json"]) == 0
    messages = [{"role": "user", "content": [{"type": "image", "image": picture.read_bytes()},
                                             {"type": "text", "text": "def fib(n):"}]}]
    with Engine(EngineOptions(model=str(folder), device="cpu", dtype="float32")) as engine:
        reply = engine.generate(GenerateRequest(messages=tuple(messages),
                                                sampling=SamplingParams(temperature=0.0, max_tokens=8)))
    assert json.loads(capsys.readouterr().out)["token_ids"] == list(reply.token_ids)
