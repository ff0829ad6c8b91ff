#!/usr/bin/env bash
# The device calls of 2026-12-07 (evening), one warm machine, each call one phase (bench/results/2026-12-07-h100-trials):
#   bash bench/wave8_device.sh PHASE OUT_DIR COMMIT
# 1. The Qwen3.5-35B-A3B shape against llama.cpp on one Q4_K_M file (bench/h2h_h200.sh) with the hybrid step kernels
#    on (engine.system.triton_support.HYBRID_STEP_KERNELS), decode and image rows; the kernels' GPU tests run beside
#    the llama.cpp build (they end before llama-bench starts).
# 2. On the warm machine: phase 1's file with the kernels off (the same rows' before); the graphed verify steps'
#    GPU tests; Qwen3-30B-A3B's shape (random Q4_K_M blocks) off against n-gram drafts at 0.6 with the verify steps
#    graphed (engine.runtime.model_runner.VERIFY_ON_CUDA_GRAPHS).
# 3. The new architectures' and the towers' GPU tests (WISP_GGUF_DIR: .gg carried), then one 12 GiB row each of the
#    Gemma 4 26B-A4B, GLM-4.7-Flash and Nemotron 3 Nano shapes (random Q4_K_M blocks; traces drawn with Qwen3-30B-A3B's
#    published statistics scaled to the shape's experts, "assumed statistics") against static-UVA and resident.
set -u
PHASE=${1:?usage: bench/wave8_device.sh PHASE OUT_DIR COMMIT}
OUT=${2:?usage: bench/wave8_device.sh PHASE OUT_DIR COMMIT}
COMMIT=${3:-unknown}
mkdir -p "$OUT"
[ -d /tmp/site/gguf ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
KERNELS=engine.system.triton_support.HYBRID_STEP_KERNELS
GRAPHED=engine.runtime.model_runner.VERIFY_ON_CUDA_GRAPHS
Q35=/tmp/h2h/qwen3.5-35b-a3b
start=$SECONDS
gpu_tests() {  # gpu_tests SECONDS NAME [bench.params assignments --] FILES...: pytest -v, its output to OUT/pytest-NAME.txt
    local seconds=$1 name=$2
    shift 2
    timeout "$seconds" python3 -m bench.params "$@" > "$OUT/pytest-$name.txt" 2>&1
    echo "pytest $name: $(grep -cE ' PASSED' "$OUT/pytest-$name.txt") passed, $(grep -cE ' FAILED| ERROR' \
        "$OUT/pytest-$name.txt") failed ($((SECONDS - start)) s)"
}

case $PHASE in
1)
    gpu_tests 230 hybrid "$KERNELS=True" -- -m pytest -m gpu -p no:xdist -v tests/gpu/test_hybrid_step_gpu.py \
        tests/gpu/test_hybrid.py tests/gpu/test_decode_step.py &
    H2H_COMMIT=$COMMIT SHAPE=qwen3.5-35b-a3b LLAMA_BUDGETS=12,8,16,24 DEADLINE=${DEADLINE:-570} WISP_PARAMS="$KERNELS=True" \
        WISP_ROWS="--budgets 12,8,16 --arms resident,wisp;--budgets 24 --arms wisp;--budgets 12,8 --arms wisp \
--link-gbps 25;--image 1280x720 --budgets 12 --arms resident,wisp" \
        bash bench/h2h_h200.sh "$OUT/h2h" .llama/llama.cpp.tar.xz Q4_K_M
    wait
    ;;
2)
    timeout 170 python3 -m engine.bench.suite --gguf $Q35/g/Q4_K_M.gguf --trace $Q35/assumed.npz --prompt 512 \
        --tokens 64 --runs 3 --budgets 12 --arms resident,wisp --label "kernels off, commit $COMMIT" --out "$OUT/q35-off" \
        --also "--budgets 24 --arms wisp --out $OUT/q35-off-24" 2>&1 | cut -c1-300 | tail -8
    gpu_tests 120 verify "$GRAPHED=False" -- -m pytest -m gpu -p no:xdist -v tests/gpu/test_speculative_gpu.py
    timeout 250 python3 -m bench.params "$GRAPHED=True" -- -m engine.bench.suite --shape qwen3-30b-a3b --quant Q4_K_M \
        --trace resources/traces/qwen3-published_chat-carry44.npz --prompt 512 --tokens 64 --runs 3 --budgets 12 \
        --arms resident,wisp --label "verify graphed, commit $COMMIT" --out "$OUT/q30-off" \
        --also "--speculative ngram --accept-rate 0.6 --out $OUT/q30-ngram06" 2>&1 | cut -c1-300 | tail -8
    ;;
3)
    WISP_GGUF_DIR=$PWD/.gg gpu_tests 240 arch -- -m pytest -m gpu -p no:xdist -v tests/gpu/test_gguf_architectures.py \
        tests/gpu/test_gemma4.py tests/gpu/test_conv_mamba_hybrids.py tests/gpu/test_vision_gguf.py \
        tests/gpu/test_gemma4_vision.py tests/gpu/test_vision.py \
        "tests/gpu/test_cuda.py::test_bf16_greedy_matches_transformers_on_cuda[minimax_m2]" \
        "tests/gpu/test_cuda.py::test_bf16_greedy_matches_transformers_on_cuda[qwen3_vl_moe]"
    for shape in gemma-4-26b-a4b glm-4.7-flash nemotron-3-nano-30b-a3b; do
        experts=$(python3 -c "from engine.model.shapes import shape; c = shape('$shape'); print(c.num_experts \
if getattr(c, 'num_experts', None) else c.n_routed_experts)")
        python3 -m engine.cli trace synth --shape $shape --carry-over 0.46 --cover90 $((65 * experts / 128)) \
            --top-share $(python3 -c "print(round(0.043 * 128 / $experts, 4))") --requests 4 --prompt 512 --tokens 64 \
            --seed 1 --out /tmp/$shape.npz 2>&1 | tail -1 | cut -c1-200
        timeout ${ARCH_TIMEOUT:-100} python3 -m engine.bench.suite --shape $shape --quant Q4_K_M --trace /tmp/$shape.npz \
            --prompt 512 --tokens 64 --runs 3 --budgets 12 --arms resident,wisp,static-uva \
            --label "assumed statistics (Qwen3-30B-A3B's, scaled), commit $COMMIT" --out "$OUT/arch-$shape" 2>&1 \
            | cut -c1-300 | tail -6
    done
    ;;
esac
for dir in "$OUT"/*/; do [ -d "$dir" ] && tar czf "${dir%/}.tgz" -C "$OUT" "$(basename "$dir")" && rm -rf "$dir"; done
echo "== phase $PHASE done at $((SECONDS - start)) s"
