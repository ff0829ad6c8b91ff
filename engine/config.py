"""Engine options chosen by the user (frozen). What is derived from them at load time lives in MemoryPlan."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from engine.alloc.memory_plan import PlanRequest
from engine.errors import RequestError
from engine.expert_modes import ExpertMode

Progress = Callable[[float, str], None]  # (fraction done, what is loading now), called while a model loads
DEVICES = ("auto", "cpu", "cuda")
DTYPE_CHOICES = ("auto", "bfloat16", "float16", "float32")
DEFAULT_MAX_MODEL_LEN = 4096  # context when neither the options nor a smaller model limit it
BACKENDS = ("auto", "wisp", "llama.cpp")  # which engine runs a .gguf file (engine.gguf.backend_choice)
DENSE_WEIGHTS = ("auto", "file", "dtype")  # a .gguf file's dense weights on Wisp's engine (engine.quant.dense)
SPECULATIVE_MODES = ("off", "ngram", "mtp", "auto")  # how drafts are made (engine.runtime.speculation)
MAX_DRAFT_TOKENS = 64  # most drafts one verify step may check
DENSE_QUANTS = ("q8_0",)  # what a checkpoint's dense weights may be quantized to at load (engine.quant.dense_quant)


@dataclass(frozen=True)
class EngineOptions:
    """model: folder, .gguf, HF cache id or None for the bundled demo. budget_bytes: most device memory to use."""

    model: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    experts: ExpertMode | str = ExpertMode.RESIDENT  # normalised to ExpertMode
    expert_slots: int | None = None
    budget_bytes: int | None = None
    host_budget_bytes: int | None = None  # most host RAM to hold experts in; None: what the machine can spare
    pin_trace: str | None = None  # a routing trace (.npz): past the host budget, its most used experts are pinned
    prefetch: bool = False
    max_model_len: int | None = None
    max_num_seqs: int = 8
    block_size: int = 16
    prefill_chunk: int = 2048  # most prompt tokens of a request a step, decode steps of others between; 0: off
    kv_blocks: int | None = None  # override the KV pool size (tests, experiments)
    online: bool = True  # paged mode with a budget: re-split experts/KV at drained barriers (MV-WSA controller)
    decode: str = "auto"  # "graphs" (CUDA graphs), "static" (same shapes, eager), "dynamic"; auto = graphs on CUDA
    deterministic: bool = True  # CUDA: bitwise-repeatable kernels (engine.runtime.determinism); False for speed tests
    attention: str = "auto"  # decode attention: "triton" (engine.model.decode_attention), "sdpa"; auto = triton on CUDA
    backend: str = "auto"  # .gguf files: "wisp" (Wisp's engine), "llama.cpp", or auto (Wisp's when it runs the file)
    # .gguf files on Wisp's engine: "file" keeps quantized dense tensors in their blocks, "dtype" dequantizes them to
    # the compute dtype at load; auto = file on CUDA, dtype on the CPU (keeps_file_types)
    dense_weights: str = "auto"
    # safetensors checkpoints: None keeps the dense weights in the compute dtype; "q8_0" quantizes the linear layers
    # and the embedding to Q8_0 at load (engine.quant.dense_quant): less device memory, other outputs
    dense_quant: str | None = None
    # .gguf files on Wisp's engine: the vision tower's mmproj file; None finds one beside the model (mmproj*.gguf)
    mmproj: str | None = None
    n_gpu_layers: int | None = None  # GGUF (llama.cpp) only: layers offloaded to the GPU, None = all
    n_cpu_moe: int = 0  # GGUF (llama.cpp) only: the first N layers keep their experts on the CPU (--n-cpu-moe)
    api_key: str | None = field(default=None, repr=False)  # remote servers only (model = http(s)://host:port/v1)
    # .gguf files on Wisp's engine: an attention's q/k/v projections of one block type merged into one layer (one
    # decode GEMV launch instead of up to three; the same bits; engine.quant.merged_projections)
    merge_qkv: bool = False
    # Speculative decoding (Wisp's engine): "ngram" drafts from n-grams of the prompt and the reply (then of
    # earlier requests, engine.generation.speculative.ngram_cache), "mtp" from the model's own draft layers, "auto"
    # the model's draft layers where Wisp runs them, else ngram; verified losslessly.
    speculative: str = "off"
    draft_tokens: int = 8  # most drafts a step verifies; the engine picks fewer when they do not pay

    def __post_init__(self):
        if self.device not in DEVICES:
            raise RequestError(f"device must be one of {', '.join(DEVICES)}, got '{self.device}'")
        if self.dtype not in DTYPE_CHOICES:
            raise RequestError(f"dtype must be one of {', '.join(DTYPE_CHOICES)}, got '{self.dtype}'")
        if self.decode not in ("auto", "graphs", "static", "dynamic"):
            raise RequestError(f"decode must be auto, graphs, static or dynamic, got '{self.decode}'")
        if self.attention not in ("auto", "sdpa", "triton"):
            raise RequestError(f"attention must be auto, sdpa or triton, got '{self.attention}'")
        if self.dense_weights not in DENSE_WEIGHTS:
            raise RequestError(f"dense weights must be one of {', '.join(DENSE_WEIGHTS)}, got '{self.dense_weights}'")
        if self.dense_quant is not None and self.dense_quant not in DENSE_QUANTS:
            raise RequestError(f"dense quant must be one of {', '.join(DENSE_QUANTS)} (or none), "
                               f"got '{self.dense_quant}'")
        if self.speculative not in SPECULATIVE_MODES:
            raise RequestError(f"speculative must be one of {', '.join(SPECULATIVE_MODES)}, got '{self.speculative}'")
        if not 1 <= self.draft_tokens <= MAX_DRAFT_TOKENS:
            raise RequestError(f"draft tokens must be 1 to {MAX_DRAFT_TOKENS}, got {self.draft_tokens}")
        if self.backend not in BACKENDS:
            raise RequestError(f"backend must be one of {', '.join(BACKENDS)}, got '{self.backend}'")
        object.__setattr__(self, "experts", ExpertMode.parse(self.experts))
        if self.expert_slots is not None and self.expert_slots < 1:
            raise RequestError(f"expert slots must be positive, got {self.expert_slots}")
        if self.host_budget_bytes is not None and self.host_budget_bytes < 1:
            raise RequestError(f"the host budget must be a positive size, got {self.host_budget_bytes}")
        if self.max_num_seqs < 1 or self.block_size < 1:
            raise RequestError("max_num_seqs and block_size must be positive")
        if self.prefill_chunk < 0:
            raise RequestError(f"prefill_chunk must be 0 (off) or a number of tokens, got {self.prefill_chunk}")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise RequestError(f"max_model_len must be at least 2, got {self.max_model_len}")
        if (self.n_gpu_layers is not None and self.n_gpu_layers < 0) or self.n_cpu_moe < 0:
            raise RequestError("n_gpu_layers and n_cpu_moe must be 0 or more")

    def context_length(self, max_position_embeddings: int) -> int:
        """The longest sequence the engine plans for: the options' limit (or the default) within the model's."""
        return min(self.max_model_len or DEFAULT_MAX_MODEL_LEN, max_position_embeddings)

    def experts_on_host(self, device_type: str) -> bool:
        """Whether expert rows live in host memory: every mode but resident, and resident on the CPU."""
        return self.experts.keeps_experts_on_host or device_type == "cpu"

    def keeps_file_types(self, device_type: str) -> bool:
        """Whether a GGUF file's quantized dense tensors stay in their blocks (engine.quant.dense): 'file' yes,
        'dtype' no (dequantized to the compute dtype at load, as bf16 checkpoints are held); 'auto' keeps them on
        CUDA, where the quantized GEMV reads the blocks, and dequantizes on the CPU, where the torch reference would
        dequantize every matrix every step (~40x the time of reading it dequantized)."""
        return self.dense_weights == "file" or (self.dense_weights == "auto" and device_type == "cuda")

    @property
    def planned_draft_tokens(self) -> int:
        """--draft-tokens where the engine drafts (the plan holds a hybrid's verify steps' scratch state rows for
        them: engine.alloc.memory_plan.verify_state_rows), else 0."""
        return self.draft_tokens if self.speculative != "off" else 0

    def plan_request(self, max_position_embeddings: int) -> PlanRequest:
        """What the memory planner is asked for a model of this context limit (the loader and the picker's
        estimate both start here, so they agree)."""
        max_model_len = self.context_length(max_position_embeddings)
        return PlanRequest(mode=self.experts, budget_bytes=self.budget_bytes, block_size=self.block_size,
                           max_model_len=max_model_len, max_num_seqs=self.max_num_seqs,
                           max_batched_tokens=max_model_len, expert_slots=self.expert_slots, kv_blocks=self.kv_blocks,
                           draft_tokens=self.planned_draft_tokens)
