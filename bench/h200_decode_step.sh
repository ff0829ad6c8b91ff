#!/usr/bin/env bash
# The fused decode step (engine.system.triton_support.fused_step) on the H200 in one call
# (bench/results/2026-12-02-decode-step):  bash bench/h200_decode_step.sh OUT_DIR
# 1. the fused kernels' GPU tests (bits of the kernels they replace), 2. profile_decode's resident step without and
# with them (--fused-step 0,1: timings, then each one's kernel table), 3. the engine's tokens with and without
# them, and with them (the default) across expert modes and against transformers, in what is left of LIMIT_S.
set -u
OUT=${1:?usage: bench/h200_decode_step.sh OUT_DIR}
LIMIT_S=${LIMIT_S:-190}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
TRACE=resources/traces/qwen3-published_chat-carry44.npz
left() { echo $((LIMIT_S - SECONDS)); }
summary() { grep -E "^(FAILED|ERROR)|passed|failed|error" "$1" | tail -8 | cut -c1-300; }
echo "== kernel tests ($SECONDS s)"
timeout 45 python -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_decode_step.py -k "fused" \
    > "$OUT/gpu-kernel-tests.txt" 2>&1
summary "$OUT/gpu-kernel-tests.txt"
echo "== profile ($SECONDS s)"
timeout $(( $(left) < 105 ? $(left) : 105 )) python -m bench.profile_decode --quant Q4_K_M --trace $TRACE \
    --arms resident --tokens 32 --prompt 512 --fused-step 0,1 --out "$OUT/profile.json" > "$OUT/profile-512.txt" 2>&1
grep -E '^\{"arm"' "$OUT/profile-512.txt" | cut -c1-300; tail -2 "$OUT/profile-512.txt" | cut -c1-300
echo "== engine tests ($SECONDS s, $(left) s left)"
if [ "$(left)" -gt 15 ]; then
    timeout $(left) python -m pytest -q -p no:cacheprovider -m gpu -x tests/gpu/test_cuda.py \
        -k "fused_step or (qwen3_moe and (expert_modes or greedy)) or eager_static" > "$OUT/gpu-tests.txt" 2>&1
    summary "$OUT/gpu-tests.txt"
fi
echo "== done ($SECONDS s)"
