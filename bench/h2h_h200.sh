#!/usr/bin/env bash
# The head-to-head against llama.cpp on one file, on the H200, in one device call or, for a file as large as
# Qwen3-Next-80B-A3B's (45 GiB), in two on the same warm machine (bench/results/2026-12-01-h200-h2h,
# 2026-12-07-qwen35-h2h):
#   [SHAPE=qwen3.5-35b-a3b] bash bench/h2h_h200.sh OUT_DIR LLAMA_SRC_TAR_XZ [FILE_TYPE]
# 1. llama.cpp (the source bench/llama_cpp_source.sh trims, as a .tar.xz) built with CUDA for sm_90 by its own
#    CMake, while the f16 template of SHAPE (default qwen3-30b-a3b; qwen3.5-35b-a3b and qwen3-next-80b-a3b are the
#    hybrid ones) is drawn on the GPU (bench/synthetic_gguf.py) and a CPU-only llama-quantize is built beside;
# 2. the template quantized by llama-quantize to FILE_TYPE (default Q4_K_M) and assembled into the whole file
#    while the CUDA build goes on. The disk holds one shape's files: where it has less free than the steps need at
#    once (`synthetic_gguf.py sizes`), the other shapes' files in WORK's parent go first. The f16 template goes once
#    quantized, the quantized one once assembled;
# 3. llama-bench --n-cpu-moe at LLAMA_BUDGETS GiB of device buffers with 16 and 8 threads (bench/llama_cpp_bench.py;
#    a budget above the file, e.g. 64 for a 45 GiB file on an 80 GB card, is its resident row). Its rows are kept in
#    WORK as each ends, so a call that runs out of time loses one run and the next call goes on from there;
#    LLAMA_BUDGETS= (empty) runs none;
# 4. `wisp bench --gguf` on the same file, each row at the H200's link and paced to PCIe4 (--link-gbps 25):
#    WISP_ROWS names the `wisp bench` sessions, in order, as long as the call's time lasts (DEADLINE seconds after
#    the start, default 575; llama-bench stops WISP_RESERVE seconds, default 60, before it); WISP_ROWS= (empty)
#    runs none. The Qwen3 shape runs on its published-locality trace; the others have none, so a trace is drawn
#    with Qwen3-30B-A3B's published statistics scaled to the shape's experts (bench/results/2026-12-02-hybrid-h200).
#    WISP_PARAMS (NAME=VALUE ...) sets engine module attributes for those sessions first (bench/params.py), e.g. a
#    developer constant on trial.
# Steps whose outputs already exist in WORK (a warm machine) are skipped. Everything printed goes to OUT/log.txt.
set -u
OUT=${1:?usage: bench/h2h_h200.sh OUT_DIR LLAMA_SRC_TAR_XZ [FILE_TYPE]}
SRC=${2:?usage: bench/h2h_h200.sh OUT_DIR LLAMA_SRC_TAR_XZ [FILE_TYPE]}
TYPE=${3:-Q4_K_M}
SHAPE=${SHAPE:-qwen3-30b-a3b}
WORK=${WORK:-/tmp/h2h}/$SHAPE
LLAMA_BUDGETS=${LLAMA_BUDGETS-12,8,16,24}
DEADLINE=${DEADLINE:-575}
start=$SECONDS
left() { echo $((DEADLINE - (SECONDS - start))); }
mkdir -p "$OUT" "$WORK/g" "$(dirname "$WORK")/lb"
export PYTHONUNBUFFERED=1
exec > >(tee -a "$OUT/log.txt") 2>&1
echo "== machine"
nproc; free -g | head -2; df -h "$WORK" | tail -1
nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv,noheader
nvcc --version | tail -2; cmake --version | head -1; python3 -c "import torch, gguf; print(torch.__version__)"

LAYERS=$(python3 -c "from engine.model.shapes import shape; print(shape('$SHAPE').num_hidden_layers)")
case $SHAPE in
    qwen3-30b-a3b) TRACE=resources/traces/qwen3-published_chat-carry44.npz ;;
    *) TRACE=$WORK/assumed.npz  # Qwen3-30B-A3B's published statistics (128 experts: 65 carry 90%, the top one
       # 4.3%), scaled to the shape's experts (256: 130 and 2.15%; 512: 260 and 1.075%)
       read -r COVER90 TOP_SHARE < <(python3 -c "from engine.model.shapes import shape
e = shape('$SHAPE').num_experts; print(65 * e // 128, 0.043 * 128 / e)")
       [ -e "$TRACE" ] || python3 -m engine.cli trace synth --shape "$SHAPE" --carry-over 0.46 --cover90 "$COVER90" \
           --top-share "$TOP_SHARE" --requests 4 --prompt 512 --tokens 96 --seed 1 --out "$TRACE" 2>&1 | tail -1 | cut -c1-200 &
       trace=$! ;;
esac
LB=$(dirname "$WORK")/lb  # llama.cpp with CUDA: llama-bench
LQ=$(dirname "$WORK")/lq  # llama.cpp for the CPU alone: llama-quantize, built in a minute while CUDA's compiles
BIN=$LB/bin
CMAKE_COMMON=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
              -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF)
[ -d "$(dirname "$WORK")/src/llama.cpp" ] || { mkdir -p "$(dirname "$WORK")/src" && tar xJf "$SRC" -C "$(dirname "$WORK")/src"; }
SRC_DIR=$(dirname "$WORK")/src/llama.cpp
if [ ! -x "$BIN/llama-bench" ]; then
    echo "== build llama.cpp (CUDA, sm_90, no FlashAttention kernels)"
    (
        cmake -S "$SRC_DIR" -B "$LB" "${CMAKE_COMMON[@]}" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF \
            -DGGML_CUDA_NCCL=OFF > "$LB.cmake.log" 2>&1 || { tail -30 "$LB.cmake.log"; exit 1; }
        built=$SECONDS
        ninja -C "$LB" llama-bench > "$LB.build.log" 2>&1 || { tail -40 "$LB.build.log"; exit 1; }
        echo "build: $((SECONDS - built)) s ($(grep -c '\.cu\.o' "$LB.build.log") CUDA objects)"
    ) &
    build=$!
fi
if [ ! -x "$LQ/bin/llama-quantize" ]; then
    (
        cmake -S "$SRC_DIR" -B "$LQ" "${CMAKE_COMMON[@]}" -DGGML_CUDA=OFF > "$LQ.cmake.log" 2>&1 \
            && ninja -C "$LQ" llama-quantize > "$LQ.build.log" 2>&1 || tail -30 "$LQ.build.log"
    ) &
    qbuild=$!
fi
FILE=$WORK/g/$TYPE.gguf
if [ ! -e "$FILE" ] && [ ! -e "$WORK/g/t-f16.gguf" ] && [ ! -e "$WORK/g/t-$TYPE.gguf" ]; then
    python3 bench/synthetic_gguf.py sizes --shape "$SHAPE" --type "$TYPE"
    need=$(python3 -c "from bench.synthetic_gguf_sizes import synthetic_sizes
print(synthetic_sizes('$SHAPE', '$TYPE').peak_disk >> 30)")
    free=$(($(df --output=avail -B1 "$WORK" | tail -1) >> 30))
    if [ "$free" -lt $((need + 2)) ]; then  # 2 GiB beside them for the llama.cpp builds
        echo "== $free GiB free, $need GiB needed: removing the other shapes' files"
        find "$(dirname "$WORK")" -mindepth 3 -maxdepth 3 -path "*/g/*.gguf" ! -path "$WORK/*" -print -delete
    fi
    echo "== f16 template of $SHAPE (full width)"
    t0=$SECONDS; python3 bench/synthetic_gguf.py template "$WORK/g/t-f16.gguf" --shape "$SHAPE" 2>&1 | tail -2
    echo "template: $((SECONDS - t0)) s"
fi
[ -n "${qbuild:-}" ] && { wait "$qbuild" || echo "llama-quantize build failed"; }
echo "elapsed $((SECONDS - start)) s"

if [ -x "$LQ/bin/llama-quantize" ] && [ ! -e "$FILE" ]; then
    echo "== quantize and assemble $TYPE"
    t0=$SECONDS
    "$LQ/bin/llama-quantize" "$WORK/g/t-f16.gguf" "$WORK/g/t-$TYPE.gguf" "$TYPE" 16 > "$WORK/quantize-$TYPE.log" 2>&1 \
        || tail -20 "$WORK/quantize-$TYPE.log"
    grep -E "exps|attn_v|attn_qkv|output.weight|token_embd|quant size" "$WORK/quantize-$TYPE.log" | cut -c1-160
    rm -f "$WORK/g/t-f16.gguf"
    python3 bench/synthetic_gguf.py assemble "$WORK/g/t-$TYPE.gguf" "$FILE" --layers "$LAYERS" \
        && rm -f "$WORK/g/t-$TYPE.gguf"
    echo "quantize + assemble: $((SECONDS - t0)) s"
fi
[ -n "${build:-}" ] && { wait "$build" || echo "llama.cpp build failed"; }
[ -n "${trace:-}" ] && wait "$trace"  # a bare `wait` would also wait for the log's tee
echo "elapsed $((SECONDS - start)) s"

ROWS=${WISP_ROWS-"--budgets 12,8 --arms resident,wisp;--budgets 12,8 --arms wisp --link-gbps 25;\
--budgets 24 --arms wisp --link-gbps 25;--budgets 24 --arms wisp;--prompt 2048 --budgets 12 --arms resident,wisp --link-gbps 25"}
reserve=0
[ -n "$ROWS" ] && reserve=${WISP_RESERVE:-60}
if [ -e "$FILE" ] && [ -n "$LLAMA_BUDGETS" ] && [ $(($(left) - reserve)) -gt 0 ]; then
    echo "== llama-bench --n-cpu-moe on $TYPE ($SHAPE), -t ${LLAMA_THREADS:-16,8}, $(($(left) - reserve)) s"
    timeout $(($(left) - reserve)) python3 bench/llama_cpp_bench.py --bench "$BIN/llama-bench" \
        --model "$FILE" --budgets "$LLAMA_BUDGETS" --threads "${LLAMA_THREADS:-16,8}" --out "$WORK/llama-$TYPE" 2>&1 \
        | cut -c1-300
    echo "elapsed $((SECONDS - start)) s"
fi
[ -d "$WORK/llama-$TYPE" ] && tar czf "$OUT/llama-$SHAPE-$TYPE.tgz" -C "$WORK" "llama-$TYPE"

if [ -e "$FILE" ] && [ -e "$TRACE" ] && [ -n "$ROWS" ] && [ "$(left)" -gt 30 ]; then  # timeout 0 would not stop
    echo "== wisp bench --gguf $TYPE ($SHAPE, $(left) s left)"
    # ROWS: sessions of `wisp bench`, ';'-separated, the first the main one (its flags after the shared ones)
    IFS=';' read -ra SESSIONS <<< "$ROWS"
    also=()
    for session in "${SESSIONS[@]:1}"; do
        tag=$(echo "$session" | tr -cs 'A-Za-z0-9' '-' | sed 's/^-*//; s/-*$//')
        also+=(--also "$session --out $OUT/wisp-$SHAPE-$tag")
    done
    timeout $(left) python3 -m bench.params ${WISP_PARAMS:-} -- -m engine.bench.suite --gguf "$FILE" --trace "$TRACE" --prompt 512 --tokens 64 --runs 3 \
        --label "same file as llama.cpp, commit ${H2H_COMMIT:-unknown}" --out "$OUT/wisp-$SHAPE" \
        ${SESSIONS[0]} "${also[@]}" 2>&1 | cut -c1-400
fi
echo "== done at $((SECONDS - start)) s"
