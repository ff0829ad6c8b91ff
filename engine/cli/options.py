"""The `wisp` commands' shared options and how they become EngineOptions / SamplingParams. Imported by the
command modules (engine/cli/run.py, serve.py, ...), never importing them: the CLI's imports form no circle.

Every value is checked as it is parsed, so a bad one is one line and status 2 before anything loads."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from pathlib import Path

from engine.config import BACKENDS, DENSE_QUANTS, DENSE_WEIGHTS, MAX_DRAFT_TOKENS, SPECULATIVE_MODES, EngineOptions
from engine.errors import RequestError, WispError
from engine.request_checks import INT32_MAX, REASONING_EFFORTS, check_int, check_text
from engine.sampling_checks import SEED_MAX, SEED_MIN
from engine.sampling import SamplingParams
from engine.units import parse_size
from engine.expert_modes import ExpertMode, names as expert_mode_names

MAX_EXPERT_SLOTS = 4096  # more experts per layer than any released MoE; a larger number is a typo


class UsageError(WispError):
    """A command line argparse refused (shown as one line, status 2)."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (`wisp run: error: ...; see wisp run --help`), raised for
    engine.cli.program.main to print, instead of the whole usage text and a SystemExit."""

    def error(self, message: str):
        option = re.match(r"argument (--[\w-]+)", message)
        hint = ""
        if option and "expected one argument" in message:  # `--budget -1GiB`: argparse took -1GiB for an option
            hint = f" (write a value that starts with '-' as {option.group(1)}=-VALUE)"
        raise UsageError(f"{message}{hint}; see `{self.prog} --help`")


def whole(low: int, high: int):
    """An argparse type: a whole number in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
        try:
            return check_int(value, "value", low, high, label="the value")
        except RequestError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def size(text: str) -> int:
    """An argparse type: a positive size such as 12GiB."""
    try:
        value = parse_size(text)
    except RequestError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive size")
    return value


def number(text: str) -> float:
    """An argparse type: a finite real number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"'{text}' is not a finite number")
    return value


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", default=None,
                        help="model folder, .gguf file, Hugging Face cache id org/name, or an OpenAI-compatible "
                             "server URL http(s)://host:port/v1 (default: bundled demo)")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float16", "float32"])
    parser.add_argument("--experts", default="resident", choices=expert_mode_names(),
                        help="where expert weights live: all on the device, paged WiSP slots, or static offload")
    parser.add_argument("--expert-slots", type=whole(1, MAX_EXPERT_SLOTS), default=None,
                        help="paged mode: expert slots per MoE layer (at most the model's experts per layer)")
    parser.add_argument("--budget", type=size, default=None, help="most device memory to use, e.g. 12GiB")
    parser.add_argument("--host-budget", type=size, default=None,
                        help="most host RAM to hold experts in, e.g. 24GiB (default: available RAM less a reserve); "
                             "paged experts past it stay memory-mapped in the model file")
    parser.add_argument("--pin-trace", default=None, metavar="TRACE",
                        help="a routing trace of this model (wisp trace): past --host-budget, its most used experts "
                             "are the ones pinned (default: in layer order)")
    parser.add_argument("--max-model-len", type=whole(2, INT32_MAX), default=None,
                        help="context length (default: min(model, 4096))")
    parser.add_argument("--prefill-chunk", type=whole(0, INT32_MAX), default=2048, metavar="N",
                        help="a long prompt runs N tokens a step, other requests' streams decoding between its "
                             "chunks (0: whole prompts in one step)")
    parser.add_argument("--decode", default="auto", choices=["auto", "graphs", "static", "dynamic"],
                        help="decode path: CUDA graphs (auto on CUDA), static shapes without graphs, or dynamic")
    parser.add_argument("--nondeterministic", action="store_true",
                        help="CUDA: without torch's deterministic kernels (default: repeatable)")
    parser.add_argument("--attention", default="auto", choices=["auto", "triton", "sdpa"],
                        help="decode attention: the engine's Triton kernels (auto on Ampere+ CUDA; bitwise repeatable) "
                             "or PyTorch's SDPA")
    parser.add_argument("--backend", default="auto", choices=list(BACKENDS),
                        help="engine for a .gguf file: wisp (Wisp's engine: paged experts in their quant blocks), "
                             "llama.cpp, or auto (Wisp's engine when it supports the file's architecture and types)")
    parser.add_argument("--dense-weights", default="auto", choices=list(DENSE_WEIGHTS),
                        help=".gguf on Wisp's engine: file (attention, shared experts, lm_head and the embedding stay in "
                             "the file's quant blocks), dtype (dequantized to the compute dtype at load), or auto "
                             "(file on CUDA, dtype on the CPU)")
    parser.add_argument("--dense-quant", default=None, choices=list(DENSE_QUANTS),
                        help="safetensors checkpoint: quantize the dense weights (attention, shared experts, dense "
                             "MLPs, lm_head, the embedding) to Q8_0 at load, about half of bf16's device memory. "
                             "CHANGES THE OUTPUTS (the weights' Q8_0 rounding). Refused for a .gguf file, whose "
                             "dense tensors already keep their stored types (see --dense-weights)")
    parser.add_argument("--mmproj", default=None, metavar="FILE",
                        help=".gguf on Wisp's engine: the vision tower's mmproj file (llama.cpp's mmproj-*.gguf), "
                             "so the model takes images (default: an mmproj*.gguf beside the model file)")
    parser.add_argument("--merge-qkv", action="store_true",
                        help=".gguf on Wisp's engine: q, k and v projections of one quant type in one layer (one "
                             "decode GEMV launch instead of up to three; the same outputs)")
    parser.add_argument("--speculative", default="off", choices=list(SPECULATIVE_MODES),
                        help="speculative decoding, lossless: ngram drafts tokens from n-grams of the prompt and the "
                             "reply, then of earlier requests (fast where the reply copies text seen: code edits, "
                             "re-sent files, repeated boilerplate); mtp from the "
                             "model's own draft layers; auto picks (default: off)")
    parser.add_argument("--draft-tokens", type=whole(1, MAX_DRAFT_TOKENS), default=8, metavar="K",
                        help="with --speculative: most drafts a step verifies (the engine picks fewer when they do "
                             "not pay, and no more than keep a verify step small: docs/speculative.md)")
    parser.add_argument("--n-gpu-layers", type=whole(0, INT32_MAX), default=None,
                        help=".gguf on llama.cpp: layers offloaded to the GPU (default: all)")
    parser.add_argument("--n-cpu-moe", type=whole(0, INT32_MAX), default=0,
                        help=".gguf on llama.cpp: keep the experts of the first N layers on the CPU")


def add_sampling_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-tokens", type=whole(1, INT32_MAX), default=256)
    parser.add_argument("--temperature", type=number, default=0.0, help="0 = greedy")
    parser.add_argument("--top-p", type=number, default=1.0)
    parser.add_argument("--top-k", type=whole(0, INT32_MAX), default=0)
    parser.add_argument("--seed", type=whole(SEED_MIN, SEED_MAX), default=None)
    parser.add_argument("--stop", action="append", default=[], help="stop string (repeatable, not empty)")
    parser.add_argument("--min-p", type=number, default=0.0,
                        help="drop tokens less likely than this fraction of the most likely one (0 = off)")
    parser.add_argument("--repetition-penalty", type=number, default=1.0,
                        help="above 1 makes every token of the prompt and reply less likely (1 = off)")
    parser.add_argument("--presence-penalty", type=number, default=0.0,
                        help="-2..2, subtracted once from tokens already in the reply")
    parser.add_argument("--frequency-penalty", type=number, default=0.0,
                        help="-2..2, subtracted per time a token is already in the reply")
    parser.add_argument("--logit-bias", type=bias_pair, action="append", default=[], metavar="ID=BIAS",
                        help="add BIAS (-100..100) to token ID's logit (repeatable)")
    parser.add_argument("--json-schema", default=None, metavar="FILE",
                        help="reply with JSON that this JSON schema file accepts "
                             "(a file holding {\"type\": \"object\"} asks for any JSON object)")


def add_reasoning_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reasoning-effort", choices=REASONING_EFFORTS, default=None,
                        help="how long a reasoning model thinks, for chat templates that take it (gpt-oss); "
                             "default: the template's own")
    parser.add_argument("--thinking", choices=("on", "off"), default=None,
                        help="thinking before the answer, for chat templates that switch it (Qwen3's "
                             "enable_thinking); default: the template's own")


def thinking_flag(args: argparse.Namespace) -> bool | None:
    """--thinking as GenerateRequest.enable_thinking: None when not given."""
    return None if args.thinking is None else args.thinking == "on"


def note_unused_options(engine, args: argparse.Namespace) -> None:
    """A line on stderr for each of the model's warnings (a vision tower Wisp does not run, experts left in the
    file), and for each reasoning option the model's chat template does not read."""
    for warning in engine.info.warnings:
        print(f"wisp: note: {warning}", file=sys.stderr)
    for option, value, taken, what in (
            ("--reasoning-effort", args.reasoning_effort, engine.info.reasoning_effort, "reasoning effort"),
            ("--thinking", args.thinking, engine.info.thinking_switch, "thinking switch")):
        if value is not None and not taken:
            print(f"wisp: note: {engine.info.name}'s chat template takes no {what}; {option} changes nothing",
                  file=sys.stderr)


def add_remote_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api-key", dest="remote_api_key", default=None,
                        help="API key when MODEL is a server URL, http(s)://host:port/v1 (default: $WISP_REMOTE_API_KEY)")



def add_generation_options(parser: argparse.ArgumentParser) -> None:
    """The options of the commands that generate (run, chat): the engine, sampling, reasoning and remote ones."""
    add_engine_options(parser)
    add_sampling_options(parser)
    add_reasoning_options(parser)
    add_remote_options(parser)

def remote_key_scope(args: argparse.Namespace):
    """Remote engines built by this command send --api-key (engine.backends.remote reads it)."""
    key = getattr(args, "remote_api_key", None)
    if not key:
        return contextlib.nullcontext()
    try:
        from engine.backends.remote import using_api_key
    except ImportError:
        raise WispError("remote servers need httpx: pip install 'wisp[remote]'") from None
    return using_api_key(key)


def engine_options(args: argparse.Namespace) -> EngineOptions:
    if args.expert_slots is not None and args.experts != ExpertMode.PAGED:
        raise RequestError("--expert-slots sizes the paged expert cache: use it with --experts paged")
    return EngineOptions(
        model=args.model, device=args.device, dtype=args.dtype, experts=args.experts,
        expert_slots=args.expert_slots, budget_bytes=args.budget, host_budget_bytes=getattr(args, "host_budget", None),
        pin_trace=getattr(args, "pin_trace", None),
        max_model_len=args.max_model_len, decode=getattr(args, "decode", "auto"),
        prefill_chunk=getattr(args, "prefill_chunk", 2048),
        deterministic=not getattr(args, "nondeterministic", False), attention=getattr(args, "attention", "auto"),
        n_gpu_layers=getattr(args, "n_gpu_layers", None),
        n_cpu_moe=getattr(args, "n_cpu_moe", 0), backend=getattr(args, "backend", "auto"),
        dense_weights=getattr(args, "dense_weights", "auto"), dense_quant=getattr(args, "dense_quant", None),
        merge_qkv=getattr(args, "merge_qkv", False), mmproj=getattr(args, "mmproj", None),
        speculative=getattr(args, "speculative", "off"), draft_tokens=getattr(args, "draft_tokens", 8),
    )


def sampling_params(args: argparse.Namespace) -> SamplingParams:
    for index, stop in enumerate(args.stop):
        if not stop:
            raise RequestError("--stop needs a non-empty string (an empty one would stop at once)")
        check_text(stop, f"--stop {index + 1}")
    return SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, top_p=args.top_p,
                          top_k=args.top_k, seed=args.seed, stop=tuple(args.stop), min_p=args.min_p,
                          repetition_penalty=args.repetition_penalty, presence_penalty=args.presence_penalty,
                          frequency_penalty=args.frequency_penalty, logit_bias=tuple(args.logit_bias),
                          json_schema=read_schema_file(args.json_schema))


def read_schema_file(path: str | None) -> str | None:
    """--json-schema FILE as JSON text; SamplingParams checks that it is a JSON object."""
    if path is None:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise RequestError(f"cannot read the JSON schema file {path}: {getattr(error, 'strerror', None) or error}")
    return text


def bias_pair(text: str) -> tuple[int, float]:
    """An argparse type: TOKEN_ID=BIAS."""
    token, separator, bias = text.partition("=")
    if not separator:
        raise argparse.ArgumentTypeError(f"'{text}' is not TOKEN_ID=BIAS (such as 1234=-100)")
    return whole(0, INT32_MAX)(token.strip()), number(bias.strip())


def read_key_file(path: str) -> str:
    """The first line of a key file (so that the key never shows in `ps`)."""
    try:
        with open(path, encoding="utf-8") as file:
            key = file.readline().strip()
    except (OSError, UnicodeDecodeError) as error:
        raise WispError(f"cannot read the API key file {path}: {getattr(error, 'strerror', None) or error}") from None
    if not key:
        raise WispError(f"the API key file {path} is empty; put the key on its first line")
    return key


def print_json(obj) -> None:
    print(json.dumps(obj, ensure_ascii=False))

