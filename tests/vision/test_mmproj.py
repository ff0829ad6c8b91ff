"""A GGUF model file and its vision tower's mmproj file (llama.cpp's `clip` file, written by `wisp convert-gguf
--mmproj`): the tower found beside the model or named with --mmproj gives the safetensors checkpoint's greedy tokens
for image+text prompts (CPU, fp32); Qwen3-VL's tower (deepstack mergers) reads back bit for bit; a file that is not
an mmproj, or one made for another model, is refused with the file named."""

import io
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams, engine_plan
from engine.errors import ModelFormatError, RequestError
from engine.gguf.mmproj_tower import load_mmproj_vision
from engine.gguf.mmproj_writer import write_mmproj
from engine.text.tokenizer import Tokenizer
from engine.vision.load_tower import load_vision
from engine.vision.preprocess import preprocess
from tests.vision.test_vl_tokens import CONVERSATIONS, wisp_tokens
from tests.vision.tiny_vl import encoded_image


@pytest.mark.parametrize("name", ["one image", "two images then text", "text, image, text"])
def test_gguf_with_the_mmproj_beside_it_gives_the_checkpoints_tokens(tiny_vl_dir, tiny_vl_gguf, name):
    messages = CONVERSATIONS[name]
    assert wisp_tokens(tiny_vl_gguf, messages) == wisp_tokens(tiny_vl_dir, messages)


def test_mmproj_named_with_the_option_is_the_one_loaded(tiny_vl_dir, tiny_vl_gguf, tmp_path):
    """The model alone in its folder: no tower until --mmproj names one."""
    model = tmp_path / "model.gguf"
    shutil.copy(tiny_vl_gguf, model)
    with Engine(EngineOptions(model=str(model), device="cpu", dtype="float32")) as engine:
        assert not engine.sees_images
    messages = CONVERSATIONS["one image"]
    mmproj = tiny_vl_gguf.parent / "mmproj-tiny-f32.gguf"
    assert wisp_tokens(model, messages, mmproj=str(mmproj)) == wisp_tokens(tiny_vl_dir, messages)


def test_the_plan_counts_the_tower(tiny_vl_gguf, tmp_path):
    alone = tmp_path / "model.gguf"
    shutil.copy(tiny_vl_gguf, alone)
    with_tower = engine_plan(EngineOptions(model=str(tiny_vl_gguf), device="cpu", dtype="float32"))
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


def test_a_model_file_given_as_mmproj_is_refused_naming_it(tiny_vl_gguf, tmp_path):
    with pytest.raises(ModelFormatError, match="not an mmproj file") as caught:
        Engine(EngineOptions(model=str(tiny_vl_gguf), device="cpu", dtype="float32", mmproj=str(tiny_vl_gguf)))
    assert str(tiny_vl_gguf) in str(caught.value)


def test_a_tower_for_another_hidden_size_is_refused_naming_it(tiny_vl_gguf, tmp_path):
    mmproj = tmp_path / "mmproj-other.gguf"
    with_key(tiny_vl_gguf.parent / "mmproj-tiny-f32.gguf", mmproj, "clip.vision.projection_dim", 48)
    with pytest.raises(ModelFormatError, match="hidden size 48.*hidden size 64") as caught:
        Engine(EngineOptions(model=str(tiny_vl_gguf), device="cpu", dtype="float32", mmproj=str(mmproj)))
    assert str(mmproj) in str(caught.value)


def test_mmproj_for_a_safetensors_folder_is_refused(tiny_vl_dir, tiny_vl_gguf):
    with pytest.raises(RequestError, match="--mmproj pairs a vision tower with a .gguf"):
        Engine(EngineOptions(model=str(tiny_vl_dir), device="cpu", dtype="float32",
                             mmproj=str(tiny_vl_gguf.parent / "mmproj-tiny-f32.gguf")))


def test_the_picker_pairs_the_model_with_its_tower(tiny_vl_dir, tiny_vl_gguf):
    from engine.loading.catalog import folder_entries

    entries = folder_entries(tiny_vl_gguf.parent)
    assert [entry.path for entry in entries] == [str(tiny_vl_gguf)]
    assert entries[0].sees_images and entries[0].mmproj == str(tiny_vl_gguf.parent / "mmproj-tiny-f32.gguf")
    assert folder_entries(tiny_vl_dir)[0].sees_images


def with_key(source, target, key: str, value: int) -> None:
    """A copy of a GGUF file with one integer key changed."""
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
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_wisp_run_takes_the_mmproj_option(tiny_vl_dir, tiny_vl_gguf, tmp_path, capsys):
    import json

    from engine.cli import main

    model, picture = tmp_path / "model.gguf", tmp_path / "a.png"
    shutil.copy(tiny_vl_gguf, model)
    picture.write_bytes(encoded_image(70, 50, 1))
    assert main(["run", str(model), "--mmproj", str(tiny_vl_gguf.parent / "mmproj-tiny-f32.gguf"), "--device", "cpu",
                 "--dtype", "float32", "--max-tokens", "8", "--temperature", "0", "--chat",
                 "--image", str(picture), "--prompt", "def fib(n):", "--json"]) == 0
    messages = [{"role": "user", "content": [{"type": "image", "image": picture.read_bytes()},
                                             {"type": "text", "text": "def fib(n):"}]}]
    with Engine(EngineOptions(model=str(tiny_vl_dir), device="cpu", dtype="float32")) as engine:
        reply = engine.generate(GenerateRequest(messages=tuple(messages),
                                                sampling=SamplingParams(temperature=0.0, max_tokens=8)))
    assert json.loads(capsys.readouterr().out)["token_ids"] == list(reply.token_ids)
