"""`wisp bench --image` end to end on the CPU: a tiny qwen3_5_moe shape and a tiny tower, each request one random-pixel
PNG + text tokens through the real preprocessing; the rows carry the image's TTFT, the tower's share of it and the
tokens it makes, and the plans count the tower."""

import json

import pytest

from engine.alloc.memory_plan import GiB
from engine.bench.image_prompts import ImageChatTokenizer, parse_size, random_png, tower_config
from engine.bench.suite import shape_plan
from engine.cli import main
from engine.model.shapes import shape
from engine.vision.preprocess import ImageProcessing
from engine.vision.vision_args import PUBLISHED_MAX_PIXELS, vision_args

SHAPE, LAYERS, PROMPT = "qwen3.5-topology-tiny", 4, 16


@pytest.fixture(scope="module")
def image_json(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench-image")
    trace = out / "tiny.npz"
    assert main(["trace", "synth", "--shape", SHAPE, "--carry-over", "0.46", "--cover90", "130", "--top-share",
                 "0.0215", "--requests", "2", "--prompt", "64", "--tokens", "24", "--seed", "1",
                 "--out", str(trace)]) == 0
    assert main(["bench", "--shape", SHAPE, "--layers", str(LAYERS), "--device", "cpu", "--trace", str(trace),
                 "--budgets", "0.81", "--prompt", str(PROMPT), "--tokens", "4", "--runs", "3", "--max-len", "512",
                 "--arms", "resident,wisp", "--image", "64x48", "--tower", "tiny", "--out", str(out)]) == 0
    return json.loads((out / f"{SHAPE}-b1-img64x48-p{PROMPT}-tiny.json").read_text())


def test_image_rows_time_the_tower_inside_ttft(image_json):
    rows = {row["arm"]: row for row in image_json["rows"]}
    assert set(rows) == {"resident", "wisp"} and not [row for row in rows.values() if "error" in row]
    image_tokens = ImageProcessing().num_tokens(64, 48)
    for row in rows.values():
        assert row["image"] == "64x48" and row["image_tokens"] == image_tokens
        assert row["prompt_tokens_total"] == image_tokens + 2 + PROMPT  # <|vision_start|> ... <|vision_end|> + text
        assert len(row["tower_s_runs"]) == 3 and 0 < row["tower_s_median"] < row["ttft_s_median"]
        assert 0 < row["tower_share"] < 1 and row["preprocess_s_median"] > 0
        assert row["decode_path"] == "dynamic"  # a prompt with an image decodes with M-RoPE offsets
    assert rows["wisp"]["misses"] > 0  # the budget pages experts
    assert rows["wisp"]["tokens"] == rows["resident"]["tokens"]  # the image's prompt, the same tokens in any mode


def test_the_report_has_an_image_table(image_json):
    from bench.report import table

    markdown = table(image_json)
    resident = next(r for r in image_json["rows"] if r["arm"] == "resident")
    row = next(line for line in markdown.split("### Image prompts")[1].splitlines() if line.startswith("| resident |"))
    assert f"| {resident['prompt_tokens_total']} | {resident['ttft_s_median']:.3f} | " in row
    assert f"| {resident['tower_share']:.3f} | " in row and row.endswith("| dynamic | - |")


def test_plans_count_the_tower_as_the_product_does(image_json):
    facts, resident = image_json["facts"], next(r for r in image_json["rows"] if r["arm"] == "resident")
    model_args = shape(SHAPE, LAYERS)
    tower = vision_args(tower_config("tiny", model_args))
    assert facts["tower_params"] == tower.num_params
    counted = (tower.num_params + tower.workspace_elements(PUBLISHED_MAX_PIXELS)) * 2
    fp32_expert_bytes = 3 * model_args.hidden_size * model_args.moe_intermediate_size * 4  # the CPU's experts
    text_only = shape_plan(model_args, "resident", None, None, 1, 512, fp32_expert_bytes)
    assert resident["plan_gib"] * GiB - text_only.total_bytes == pytest.approx(counted, abs=16)
    assert "prompt rows" in facts["image_routing"]


def test_the_bench_chat_template_places_the_image_tokens():
    config = tower_config("tiny", shape(SHAPE, LAYERS))
    tokenizer = ImageChatTokenizer(config)
    ids = tokenizer.encode_chat([{"role": "user", "content": [{"type": "image", "image": b""},
                                                               {"type": "text", "text": "7 8 9"}]}])
    assert ids == [config["vision_start_token_id"], config["image_token_id"], config["vision_end_token_id"], 7, 8, 9]
    assert random_png(32, 16, seed=1) == random_png(32, 16, seed=1) != random_png(32, 16, seed=2)


def test_bad_image_options_are_one_line(capsys):
    with pytest.raises(ValueError, match="WIDTHxHEIGHT"):
        parse_size("1280by720")
    with pytest.raises(SystemExit):
        main(["bench", "--shape", SHAPE, "--trace", "x.npz", "--image", "0x720", "--out", "unused"])
    assert "--image takes WIDTHxHEIGHT" in capsys.readouterr().err
    with pytest.raises(SystemExit) as raised:
        main(["bench", "--shape", "qwen3-topology-tiny", "--layers", "1", "--device", "cpu", "--trace",
              "resources/traces/qwen3-twin_chat.npz", "--image", "64x48", "--tower", "tiny", "--out", "unused"])
    assert raised.value.code == 2
    assert "--image needs a model that takes the Qwen vision tower" in capsys.readouterr().err
    with pytest.raises(SystemExit) as raised:
        main(["bench", "--shape", SHAPE, "--trace", "x.npz", "--out", "unused", "--also", "--image 64x48"])
    assert raised.value.code == 2 and "not in --also" in capsys.readouterr().err


@pytest.mark.gpu
def test_the_published_tower_on_the_gpu(tmp_path):
    """The GPU command's path at 4 of the shape's 40 layers: Qwen3.5-35B-A3B's tower in bf16 on a 1280x720 image,
    the tower timed by CUDA events, a paged arm inside its budget, and a session paced to 25 GB/s."""
    import torch

    assert torch.cuda.is_available(), "GPU tests need CUDA"
    trace = tmp_path / "assumed.npz"
    assert main(["trace", "synth", "--shape", "qwen3.5-35b-a3b", "--carry-over", "0.46", "--cover90", "130",
                 "--top-share", "0.0215", "--requests", "2", "--prompt", "512", "--tokens", "24", "--seed", "1",
                 "--out", str(trace)]) == 0
    assert main(["bench", "--shape", "qwen3.5-35b-a3b", "--layers", "4", "--trace", str(trace), "--budgets", "7",
                 "--prompt", "512", "--tokens", "8", "--runs", "2", "--max-len", "2048", "--arms", "resident,wisp",
                 "--image", "1280x720", "--out", str(tmp_path), "--also", "--arms wisp --link-gbps 25"]) == 0
    stem = "qwen3.5-35b-a3b-b1-img1280x720-p512"
    rows = json.loads((tmp_path / f"{stem}-assumed.json").read_text())["rows"]
    rows += json.loads((tmp_path / f"{stem}-link25-assumed.json").read_text())["rows"]
    assert len(rows) == 3 and not [row for row in rows if "error" in row]
    for row in rows:
        assert row["image_tokens"] == ImageProcessing().num_tokens(1280, 720) == 880
        assert 0 < row["tower_s_median"] < row["ttft_s_median"] and row["peak_gib"] > 0
    resident, wisp, paced = rows
    assert wisp["peak_gib"] <= 7 and paced["peak_gib"] <= 7 and wisp["misses"] > 0
    assert wisp["tokens"] == resident["tokens"] == paced["tokens"]


def test_the_tower_counts_beside_quantized_dense_bytes():
    from engine.bench.image_prompts import tower_plan_bytes, with_tower_sizes
    from engine.bench.suite import bench_sizes
    from engine.model.loader import LoadedWeights

    model_args = shape("qwen3.5-35b-a3b")
    seen = with_tower_sizes(LoadedWeights(model_args, None, None, None), tower_config("qwen3.5-35b-a3b", model_args))
    held = 1_600_000_000  # a Q4_K_M file's dense tensors in their blocks
    assert bench_sizes(seen.args, dense_bytes=held).dense_bytes == held + tower_plan_bytes(seen.args)
    assert bench_sizes(model_args, dense_bytes=held).dense_bytes == held
    assert 2.6 < tower_plan_bytes(seen.args) / GiB < 2.7  # 447 M parameters and a 16.7-megapixel image, bf16
