"""Where llama.cpp puts a GGUF model: layers on the GPU (n_gpu_layers) and, in the first N layers, experts kept on
the CPU (llama.cpp's --n-cpu-moe, i.e. tensor buffer-type overrides); and the MemoryPlan that describes it.

llama.cpp counts the output layer as layer n_layer: with n_gpu_layers = k it offloads the last k - 1 repeating
layers and the output; k = n_layer + 1 offloads everything but the token embeddings.
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass

from engine.alloc.memory_plan import MemoryPlan
from engine.gguf.info import GgufInfo
from engine.config import EngineOptions
from engine.errors import RequestError

KV_BLOCK_TOKENS = 16
EXPERT_PATTERN = r"blk\.{layer}\.ffn_(up|down|gate|gate_up)_(ch|)exps"  # common.h: llm_ffn_block_regex
OUTPUT_TENSORS = ("output.weight", "output_norm.weight", "output.bias", "output_norm.bias")
GPU_BUILD_HINT = ("this llama-cpp-python build has no GPU support; reinstall it with "
                  "CMAKE_ARGS=\"-DGGML_CUDA=on\" pip install --force-reinstall --no-cache-dir llama-cpp-python")


@dataclass(frozen=True)
class Placement:
    device: str  # "cpu" | "cuda"
    n_gpu_layers: int  # as llama.cpp counts them (the output layer included), 0 on the CPU
    n_cpu_moe: int  # leading layers whose experts stay in host RAM (0 on the CPU: everything is there)
    num_layers: int

    def is_layer_on_gpu(self, layer: int) -> bool:
        """layer == num_layers is the output layer."""
        return self.device == "cuda" and layer >= self.num_layers + 1 - self.n_gpu_layers

    def are_experts_on_device(self, layer: int) -> bool:
        return self.device == "cpu" or (self.is_layer_on_gpu(layer) and layer >= self.n_cpu_moe)


def resolve_placement(options: EngineOptions, info: GgufInfo, has_gpu: bool) -> Placement:
    """`--device auto` uses the GPU when this llama.cpp build has one; `cuda` without one is refused."""
    if options.device == "cuda" and not has_gpu:
        raise RequestError(f"--device cuda: {GPU_BUILD_HINT}")
    device = "cuda" if options.device != "cpu" and has_gpu else "cpu"
    if device == "cpu":
        return Placement("cpu", 0, 0, info.num_layers)
    everything = info.num_layers + 1
    n_gpu_layers = everything if options.n_gpu_layers is None else min(options.n_gpu_layers, everything)
    return Placement("cuda", n_gpu_layers, min(options.n_cpu_moe, info.num_layers), info.num_layers)


def model_params(placement: Placement):
    """llama_model_params with n_gpu_layers and the expert overrides; -> (params, objects to keep alive while
    the model loads: the override array and its pattern strings)."""
    import llama_cpp

    params = llama_cpp.llama_model_default_params()
    params.n_gpu_layers = placement.n_gpu_layers
    if not placement.n_cpu_moe:
        return params, None
    overrides = expert_overrides(placement.n_cpu_moe)
    params.tensor_buft_overrides = ctypes.cast(overrides, ctypes.c_void_p)
    return params, overrides


class TensorBufferOverride(ctypes.Structure):
    """struct llama_model_tensor_buft_override { const char * pattern; ggml_backend_buffer_type_t buft; }.
    llama-cpp-python declares the llama_model_params field as a bare pointer and gives no struct for it."""

    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


def expert_overrides(num_layers: int) -> ctypes.Array:
    """A NULL-terminated array sending the experts of layers 0..num_layers-1 to the CPU buffer type."""
    cpu = cpu_buffer_type()
    entries = [TensorBufferOverride(EXPERT_PATTERN.format(layer=layer).encode(), cpu) for layer in range(num_layers)]
    return (TensorBufferOverride * (num_layers + 1))(*entries, TensorBufferOverride(None, None))


def cpu_buffer_type() -> int:
    """ggml_backend_cpu_buffer_type() from ggml-base, which libllama links (so its handle resolves the symbol)."""
    from llama_cpp import llama_cpp as bindings

    function = bindings._lib.ggml_backend_cpu_buffer_type
    function.restype, function.argtypes = ctypes.c_void_p, []
    return function()


def memory_plan(info: GgufInfo, placement: Placement, n_ctx: int, workspace_bytes: int = 0) -> MemoryPlan:
    """llama.cpp's placement in Wisp's terms: on the GPU, what it offloads; on the CPU, everything (as Wisp's
    own CPU plans count it). Expert 'slots' are whole layers of experts: all E or none."""
    layers = range(info.num_layers)
    dense = sum(info.layer_bytes.get(i, 0) for i in layers if on_device(placement, i))
    if on_device(placement, info.num_layers):
        dense += sum(info.other_bytes.get(name, 0) for name in OUTPUT_TENSORS)
    if placement.device == "cpu":
        dense += sum(bytes_ for name, bytes_ in info.other_bytes.items() if name not in OUTPUT_TENSORS)
    moe_layers = sorted(info.expert_layer_bytes)
    slots = tuple(info.num_experts if placement.are_experts_on_device(i) else 0 for i in moe_layers)
    device_layers = sum(1 for i in layers if on_device(placement, i))
    kv_per_token = info.kv_bytes_per_token * device_layers // max(info.num_layers, 1)
    return MemoryPlan(
        mode="llama.cpp", budget_bytes=None, dense_bytes=dense, expert_bytes=info.expert_bytes,
        num_moe_layers=len(moe_layers),
        offloaded_layers=sum(1 for count in slots if count == 0), static_resident_bytes=0,
        kv_blocks=n_ctx // KV_BLOCK_TOKENS, kv_block_bytes=KV_BLOCK_TOKENS * kv_per_token,
        workspace_bytes=workspace_bytes, layer_slots=slots,
    )


def on_device(placement: Placement, layer: int) -> bool:
    return placement.device == "cpu" or placement.is_layer_on_gpu(layer)


COMPUTE_BUFFER = re.compile(r"(\S+) compute buffer size =\s*([0-9.]+) MiB")


def compute_buffer_bytes(log_lines: list[str], device: str) -> int:
    """llama.cpp reports its compute (workspace) buffers only in its log: 'CUDA0 compute buffer size = 300.01 MiB'."""
    total = 0.0
    for line in log_lines:
        match = COMPUTE_BUFFER.search(line)
        if match and (match.group(1).startswith("CPU") == (device == "cpu")) and "Host" not in match.group(1):
            total += float(match.group(2))
    return int(total * 2**20)
