#!/usr/bin/env bash
# The quantized-expert checks and bench rows on the H200 in one device call:
#   bash bench/h200_quant.sh OUT_DIR
# GPU tests of the quant kernels and the GGUF engine; tiny GGUF files of every supported k-quant and Q8_0 type on
# Wisp's engine in every expert mode (bench/gguf_modes.py); `wisp bench --quant Q4_K_M` at the Qwen3-30B-A3B shape
# (8 and 12 GiB) on the published-locality trace and the twin code trace. TINY=DIR uses GGUF files made elsewhere
# (the H200 has no llama.cpp to quantize with).
set -u
OUT=${1:?usage: bench/h200_quant.sh OUT_DIR}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
timeout 120 python -m pytest -q -x -p no:cacheprovider -m gpu tests/gpu/test_quant_kernels.py \
    $(ls tests/gpu/test_gguf_engine.py 2>/dev/null) 2>&1 | tail -25 | tee "$OUT/gpu_tests.log"
TINY=${TINY:-$OUT/tiny}  # tiny GGUF files; made here by llama.cpp's quantizer unless given
[ -e "$TINY/qwen3_moe-Q4_K_M.gguf" ] || timeout 60 python bench/tiny_gguf.py "$TINY" 2>&1 | tail -3
timeout 100 python bench/gguf_modes.py "$TINY"/*.gguf --device cuda 2>&1 | grep -v "^llama\|^load" | tail -20 | tee "$OUT/gguf_modes.log"
timeout 270 python -m engine.bench.suite --shape qwen3-30b-a3b --quant Q4_K_M \
    --trace resources/traces/qwen3-published_chat-carry44.npz --budgets 8,12 --prompt 512 --tokens 64 --runs 1 \
    --arms resident,wisp,static-uva --label "Q4_K_M experts" --out "$OUT/q4" \
    --also '--trace resources/traces/qwen3-twin_code.npz --arms wisp' 2>&1 | cut -c1-400 | tail -12
python -m bench.report "$OUT"/q4/*.json > /dev/null 2>&1; cat "$OUT"/q4/results.md 2>/dev/null | tail -20
tar czf "$OUT/q4.tgz" -C "$OUT" q4 && rm -rf "$OUT/q4"  # the results folder as one file
