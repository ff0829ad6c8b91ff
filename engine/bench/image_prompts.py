"""`wisp bench --image WxH`: every request is one image (a random-pixel PNG, so that the real decode, resize and
patching run) followed by --prompt text tokens, seen by a random-weight vision tower of a published shape on the
device in the compute dtype. The plans count the tower as the product's do (its weights and one largest image's
activations in the dense bytes: engine.vision.vision_args.vision_sizes); each run records the tower's time beside
the request's TTFT, and the time the request's images took to decode and preprocess (before its TTFT starts, as
on api.Engine's tokenizer worker)."""

from __future__ import annotations

import copy
import io
import time
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from PIL import Image

from engine.alloc.memory_plan import GiB
from engine.bench.synthetic import WEIGHT_STD, IdOnlyTokenizer
from engine.model.args import ModelArgs
from engine.model.loader import LoadedWeights
from engine.model.published_configs import QWEN3_5_35B_A3B_VISION
from engine.requests import GenerateRequest
from engine.sampling import SamplingParams
from engine.vision.preprocess import ImageProcessing
from engine.vision.tower import VisionTower
from engine.vision.vision_args import PUBLISHED_MAX_PIXELS, TOWER_MODEL_TYPES, VisionArgs, vision_args
from engine.vision.vision_model import VisionModel

# CPU tests of the harness: a two-block tower, its output in the model's hidden size, its tokens the vocabulary's last
TINY_TOWER = {"vision_config": {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2}}
TOWERS = {"qwen3.5-35b-a3b": QWEN3_5_35B_A3B_VISION, "tiny": TINY_TOWER}
TOKEN_KEYS = ("image_token_id", "vision_start_token_id", "vision_end_token_id")


class BenchImageError(ValueError):
    """An --image session that cannot run on these weights (wisp bench reports it in one line)."""


def parse_size(text: str) -> tuple[int, int]:
    """'1280x720' -> (1280, 720)."""
    width, _, height = text.lower().partition("x")
    if not (width.isdigit() and height.isdigit() and int(width) > 0 and int(height) > 0):
        raise ValueError(f"--image takes WIDTHxHEIGHT in pixels, e.g. 1280x720, got '{text}'")
    return int(width), int(height)


def tower_config(name: str, model_args: ModelArgs) -> dict:
    """The config.json fields of tower `name` for this language model: a tiny tower's output width and image tokens
    are the model's hidden size and the vocabulary's last ids; a published one must fit the model as it is."""
    config = copy.deepcopy(TOWERS[name])
    config["model_type"] = model_args.model_type
    config["vision_config"].setdefault("out_hidden_size", model_args.hidden_size)
    for offset, key in enumerate(TOKEN_KEYS):
        config.setdefault(key, model_args.vocab_size - 1 - offset)
    if model_args.model_type not in TOWER_MODEL_TYPES:
        raise BenchImageError("--image needs a model that takes the Qwen vision tower "
                              f"({', '.join(TOWER_MODEL_TYPES)}); this one is {model_args.model_type}")
    if config["vision_config"]["out_hidden_size"] != model_args.hidden_size:
        raise BenchImageError(f"the {name} tower feeds hidden size {config['vision_config']['out_hidden_size']}, the "
                              f"model's is {model_args.hidden_size}")
    outside = [key for key in TOKEN_KEYS if config[key] >= model_args.vocab_size]
    if outside:
        raise BenchImageError(f"the {name} tower's {', '.join(outside)} lie outside the model's vocabulary "
                              f"({model_args.vocab_size})")
    return config


def with_tower_sizes(weights: LoadedWeights, config: dict) -> LoadedWeights:
    """weights whose args carry the tower's sizes (ModelArgs.extra), so that every plan counts it."""
    tower = vision_args(config)
    extra = {**weights.args.extra, "vision_params": tower.num_params,
             "vision_workspace": tower.workspace_elements(PUBLISHED_MAX_PIXELS)}
    return replace(weights, args=replace(weights.args, extra=extra))


def tower_plan_bytes(model_args: ModelArgs, dtype_bytes: int = 2) -> int:
    """What a plan counts for the tower in args.extra (engine.model.sizes.dense_bytes): weights and workspace."""
    return (model_args.extra.get("vision_params", 0) + model_args.extra.get("vision_workspace", 0)) * dtype_bytes


def random_tower(args: VisionArgs, dtype: torch.dtype, device: torch.device, seed: int = 3) -> VisionTower:
    """The tower with random weights drawn on the device (norms at one), as engine.bench.synthetic draws the model."""
    generator = torch.Generator(device=device).manual_seed(seed)
    with torch.device("meta"):
        tower = VisionTower(args)
    layer_norms = {name for name, module in tower.named_modules() if isinstance(module, torch.nn.LayerNorm)}
    state = {}
    for name, param in tower.named_parameters():
        owner, _, kind = name.rpartition(".")
        if owner in layer_norms:  # weight one, bias zero
            state[name] = torch.full(param.shape, float(kind == "weight"), dtype=dtype, device=device)
        else:
            state[name] = torch.randn(param.shape, generator=generator, dtype=dtype, device=device) * WEIGHT_STD
    tower = tower.to_empty(device=device).to(dtype)
    tower.load_state_dict(state)
    tower.inv_freq = VisionTower.rotary_frequencies(args).to(device)
    return tower.eval()


class SpanTimer:
    """Seconds spent between start() and stop() pairs: CUDA events on a GPU (no sync while the engine runs; read
    after the run), the host clock on the CPU."""

    def __init__(self, device: torch.device):
        self.is_cuda = device.type == "cuda"
        self.spans: list = []

    def start(self):
        if not self.is_cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def stop(self, started) -> None:
        if not self.is_cuda:
            self.spans.append(time.perf_counter() - started)
            return
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        self.spans.append((started, event))

    def take(self) -> float:
        """The seconds of every span since the last take (synchronises on a GPU)."""
        if self.is_cuda:
            torch.cuda.synchronize()
            total = sum(start.elapsed_time(stop) for start, stop in self.spans) / 1e3
        else:
            total = sum(self.spans)
        self.spans = []
        return total


class TimedVisionModel(VisionModel):
    """engine.vision's VisionModel whose image embeddings (the pixels to the device, then the tower) are timed."""

    def __init__(self, tower: VisionTower, processing: ImageProcessing, device: torch.device):
        super().__init__(tower, processing, device)
        self.timer = SpanTimer(device)

    def embedding(self, request_id, images, image, used_to):
        started = self.timer.start()
        value = super().embedding(request_id, images, image, used_to)
        self.timer.stop(started)
        return value


class ImageChatTokenizer(IdOnlyTokenizer):
    """The bench's chat template: an image part becomes <|vision_start|><|image_pad|><|vision_end|> (the model's ids),
    a text part is its token ids written as decimal numbers."""

    chat_template_source = ""  # no reasoning format, no tool calls
    has_chat_template = True

    def __init__(self, config: dict):
        self.image_ids = [config["vision_start_token_id"], config["image_token_id"], config["vision_end_token_id"]]

    def encode_chat(self, messages, add_generation_prompt: bool = True, tools=None, documents=None,
                    **extra) -> list[int]:
        ids = []
        for message in messages:
            for part in message["content"]:
                ids += self.image_ids if part["type"] == "image" else [int(word) for word in part["text"].split()]
        return ids


def random_png(width: int, height: int, seed: int = 0) -> bytes:
    """A PNG of uniformly random RGB pixels: the same bytes for the same size and seed."""
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buffer, format="PNG")
    return buffer.getvalue()


@dataclass
class ImagePrompts:
    """Requests of one image and --prompt random text ids (drawn below the image tokens), and what each run of them
    spent on the image: preprocess_s (decode, resize, patches: inside engine.add, before TTFT's clock starts) and
    tower_s (the pixels to the device and the tower, inside the prompt step). Request i of a batch has image i
    (another seed), so that no request's image tokens come from another's KV."""

    vision: TimedVisionModel
    tokenizer: ImageChatTokenizer
    size: tuple[int, int]
    pngs: dict[int, bytes] = field(default_factory=dict)
    preprocess_s: float = 0.0

    def png(self, index: int) -> bytes:
        if index not in self.pngs:
            self.pngs[index] = random_png(*self.size, seed=index)
        return self.pngs[index]

    def add(self, engine, request_id: str, index: int, generator: torch.Generator, prompt: int, tokens: int) -> None:
        text_ids = torch.randint(0, min(self.tokenizer.image_ids), (prompt,), generator=generator).tolist()
        content = [{"type": "image", "image": self.png(index)},
                   {"type": "text", "text": " ".join(map(str, text_ids))}]
        request = GenerateRequest(messages=({"role": "user", "content": content},), request_id=request_id,
                                  sampling=SamplingParams(max_tokens=tokens, ignore_eos=True))
        started = time.perf_counter()
        engine.add(request)
        self.preprocess_s += time.perf_counter() - started

    def take(self) -> dict:
        """This run's image times (and zeroes them for the next)."""
        spent = {"preprocess_s": self.preprocess_s, "tower_s": self.vision.timer.take()}
        self.preprocess_s = 0.0
        return spent

    def attach(self, engine) -> None:
        """An engine built with self.tokenizer sees the images through the tower."""
        engine.runner.vision = self.vision

    def for_size(self, size: tuple[int, int]) -> "ImagePrompts":
        """The same tower and tokenizer with an image of another size (an --also session's)."""
        return self if size == self.size else ImagePrompts(self.vision, self.tokenizer, size)

    def facts(self, prompt: int) -> dict:
        """What every row of the session shares: the image, its tokens and the prompt they make."""
        width, height = self.size
        image_tokens = self.vision.processing.num_tokens(width, height)
        return {"image": f"{width}x{height}", "image_tokens": image_tokens,
                "prompt_tokens_total": image_tokens + len(self.tokenizer.image_ids) - 1 + prompt,
                "image_png_bytes": len(self.png(0))}


def image_speed(runs: list[dict], facts: dict, batch: int) -> dict:
    """Medians over the runs: the tower's seconds and its share of each run's TTFT, the preprocessing; the prefill
    rate over every prompt token (image tokens included)."""
    def median(values):
        return sorted(values)[len(values) // 2]

    ttft, tower_s = median([r["ttft_s"] for r in runs]), [r["tower_s"] for r in runs]
    return {**facts, "tower_s_runs": tower_s, "tower_s_median": median(tower_s),
            "tower_share": median([r["tower_s"] / r["ttft_s"] for r in runs]),
            "preprocess_s_median": median([r["preprocess_s"] for r in runs]),
            "prefill_tok_s": batch * facts["prompt_tokens_total"] / ttft}


def image_prompts(weights: LoadedWeights, tower_name: str, size: tuple[int, int], device: torch.device
                  ) -> tuple[LoadedWeights, ImagePrompts]:
    """The tower (random weights in the model's dtype, on the device) and the weights whose plans count it."""
    config = tower_config(tower_name, weights.args)
    tower = random_tower(vision_args(config), weights.dtype, device)
    vision = TimedVisionModel(tower, ImageProcessing(), device)  # the published processor's sizes and limits
    prompts = ImagePrompts(vision, ImageChatTokenizer(config), size)
    return with_tower_sizes(weights, config), prompts


def tower_facts(weights: LoadedWeights, tower_name: str) -> dict:
    """The tower the rows ran and what the plans count for it (bf16, as the bench plans every dense weight)."""
    extra = weights.args.extra
    return {"tower": tower_name, "tower_params": extra["vision_params"], "tower_gib": extra["vision_params"] * 2 / GiB,
            "tower_workspace_gib": extra["vision_workspace"] * 2 / GiB}
