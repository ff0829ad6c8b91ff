#!/usr/bin/env bash
# Issue 27's head-to-head on the H200 in one device call (bench/results/2026-12-01-h200-h2h/NOTES.md):
#   bash bench/h2h_h200.sh OUT_DIR LLAMA_SRC_TAR_XZ [FILE_TYPE]
# 1. llama.cpp (the source bench/llama_cpp_source.sh trims, as a .tar.xz) built with CUDA for sm_90 by its own
#    CMake, while the f16 template of the Qwen3-30B-A3B shape is drawn on the GPU (bench/synthetic_gguf.py);
# 2. the template quantized by llama-quantize to FILE_TYPE (default Q4_K_M) and assembled into the 48-layer file;
# 3. llama-bench --n-cpu-moe at 8/12/16/24 GiB of device buffers (bench/llama_cpp_bench.py);
# 4. `wisp bench --gguf` on the same file: resident, WiSP and static-UVA on the published-locality trace, resident and
#    WiSP at 12 GiB with a 2,048-token prompt, resident with 8,192, WiSP on the twin code trace, as long as the
#    call's time lasts (DEADLINE seconds after the start, default 575).
# Steps whose outputs already exist in WORK (a warm machine) are skipped. Everything printed goes to OUT/log.txt.
set -u
OUT=${1:?usage: bench/h2h_h200.sh OUT_DIR LLAMA_SRC_TAR_XZ [FILE_TYPE]}
SRC=${2:?usage: bench/h2h_h200.sh OUT_DIR LLAMA_SRC_TAR_XZ [FILE_TYPE]}
TYPE=${3:-Q4_K_M}
WORK=${WORK:-/tmp/h2h}
DEADLINE=${DEADLINE:-575}
start=$SECONDS
left() { echo $((DEADLINE - (SECONDS - start))); }
mkdir -p "$OUT" "$WORK/g"
export PYTHONUNBUFFERED=1
exec > >(tee -a "$OUT/log.txt") 2>&1
echo "== machine"
nproc; free -g | head -2; df -h "$WORK" | tail -1
nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv,noheader
nvcc --version | tail -2; cmake --version | head -1; python3 -c "import torch, gguf; print(torch.__version__)"

BIN=$WORK/lb/bin
if [ ! -x "$BIN/llama-bench" ]; then
    echo "== build llama.cpp (CUDA, sm_90, no FlashAttention kernels)"
    mkdir -p "$WORK/src" && tar xJf "$SRC" -C "$WORK/src"
    (
        cmake -S "$WORK/src/llama.cpp" -B "$WORK/lb" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
            -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF -DGGML_NATIVE=ON \
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
            -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF > "$WORK/cmake.log" 2>&1 || { tail -30 "$WORK/cmake.log"; exit 1; }
        built=$SECONDS
        ninja -C "$WORK/lb" llama-bench llama-quantize > "$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log"; exit 1; }
        echo "build: $((SECONDS - built)) s ($(grep -c '\.cu\.o' "$WORK/build.log") CUDA objects)"
    ) &
    build=$!
fi
if [ ! -e "$WORK/g/t-f16.gguf" ]; then
    echo "== f16 template (2 layers, full width)"
    t0=$SECONDS; python3 bench/synthetic_gguf.py template "$WORK/g/t-f16.gguf" 2>&1 | tail -2; echo "template: $((SECONDS - t0)) s"
fi
[ -n "${build:-}" ] && { wait "$build" || echo "llama.cpp build failed"; }
echo "elapsed $((SECONDS - start)) s"

FILE=$WORK/g/$TYPE.gguf
if [ -x "$BIN/llama-quantize" ] && [ ! -e "$FILE" ]; then
    echo "== quantize and assemble $TYPE"
    t0=$SECONDS
    "$BIN/llama-quantize" "$WORK/g/t-f16.gguf" "$WORK/g/t-$TYPE.gguf" "$TYPE" 16 > "$WORK/quantize-$TYPE.log" 2>&1 \
        || tail -20 "$WORK/quantize-$TYPE.log"
    grep -E "exps|attn_v|output.weight|token_embd|quant size" "$WORK/quantize-$TYPE.log" | cut -c1-160
    python3 bench/synthetic_gguf.py assemble "$WORK/g/t-$TYPE.gguf" "$FILE" --layers 48
    echo "quantize + assemble: $((SECONDS - t0)) s"
fi

if [ -e "$FILE" ] && [ ! -e "$OUT/llama-$TYPE.tgz" ]; then
    echo "== llama-bench --n-cpu-moe on $TYPE"
    timeout $(($(left) - 60)) python3 bench/llama_cpp_bench.py --bench "$BIN/llama-bench" --model "$FILE" \
        --budgets 12,8,16,24 --out "$WORK/llama-$TYPE" 2>&1 | cut -c1-600
    tar czf "$OUT/llama-$TYPE.tgz" -C "$WORK" "llama-$TYPE"
    echo "elapsed $((SECONDS - start)) s"
fi

if [ -e "$FILE" ]; then
    echo "== wisp bench --gguf $TYPE ($(left) s left)"
    timeout $(left) python3 -m engine.bench.suite --gguf "$FILE" --trace resources/traces/qwen3-published_chat-carry44.npz \
        --budgets 12,8 --prompt 512 --tokens 64 --runs 3 --arms resident,wisp,static-uva \
        --label "same file as llama.cpp, commit ${H2H_COMMIT:-unknown}" --out "$OUT/wisp-$TYPE" \
        --also "--budgets 16,24 --arms wisp,static-uva --out $OUT/wisp-$TYPE-16-24" \
        --also "--prompt 2048 --budgets 12 --arms resident,wisp --out $OUT/wisp-$TYPE-2048" \
        --also "--prompt 8192 --max-len 8448 --tokens 32 --arms resident --out $OUT/wisp-$TYPE-8192" \
        --also "--trace resources/traces/qwen3-twin_code.npz --budgets 12,8,16,24 --arms wisp --runs 1 \
                --out $OUT/wisp-$TYPE-twin" 2>&1 | cut -c1-400
fi
echo "== done at $((SECONDS - start)) s"
