#!/usr/bin/env bash
# Issue 36's prefill measurements on the H200 in one device call (bench/results/2026-12-02-prefill/NOTES.md):
#   bash bench/prefill_h200.sh OUT_DIR
# 1. the GPU tests that cover the expert kernels;
# 2. bench/prefill_moe_probe.py: one MoE layer-step per expert format, per-expert path against the grouped GEMM;
# 3. `wisp bench` on synthetic Q4_K_M experts of the Qwen3-30B-A3B shape (llama.cpp's Q4_K_M types per layer, the
#    file's slot size): resident and WiSP at 12 GiB, prompts 512 and 2048, resident at 8192; then the same
#    512-token rows with the grouped GEMM and the working-set protection off (the path before this work);
# 4. the gpt-oss-20b shape with MXFP4 experts, resident and 12 GiB, 512 tokens, as long as time is left.
# Everything printed goes to OUT/log.txt; each step stops at the call's DEADLINE (seconds, default 570).
set -u
OUT=${1:?usage: bench/prefill_h200.sh OUT_DIR}
DEADLINE=${DEADLINE:-570}
TRACE=${TRACE:-../resources/traces/qwen3-published_chat-carry44.npz}
start=$SECONDS
left() { echo $((DEADLINE - (SECONDS - start))); }
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
exec > >(tee -a "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name,memory.used,driver_version --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"

echo "== GPU tests ($(left) s left)"
timeout 150 python3 -m pytest -m gpu -x -q -p no:cacheprovider tests/gpu/test_grouped_gemm.py \
    tests/gpu/test_quant_kernels.py tests/gpu/test_mxfp4.py tests/gpu/test_cuda.py 2>&1 | tail -25

echo "== one MoE layer-step per format ($(left) s left)"
timeout 100 python3 bench/prefill_moe_probe.py --tokens 512,2048,8192 --out "$OUT"

SUITE="python3 -m engine.bench.suite --shape qwen3-30b-a3b --quant Q4_K_M --trace $TRACE --tokens 32 --runs 3"
echo "== wisp bench, grouped GEMM ($(left) s left)"
timeout $(( $(left) - 150 )) $SUITE --budgets 12 --prompt 512 --arms resident,wisp --out "$OUT/q4" \
    --also "--prompt 2048" --also "--prompt 8192 --max-len 8448 --arms resident --runs 3"
echo "== wisp bench, per-expert path, no protection ($(left) s left)"
BEFORE="engine.quant.grouped_gemm.MAX_ROWS_PER_EXPERT=0 engine.experts.pager.host_pager.PROTECTED_SHARE=0.0"
timeout $(( $(left) - 70 )) python3 -m bench.params $BEFORE -- -m ${SUITE#python3 -m } --budgets 12 --prompt 512 \
    --arms resident,wisp --out "$OUT/q4-before"
echo "== wisp bench, gpt-oss-20b MXFP4 ($(left) s left)"
timeout $(( $(left) - 5 )) python3 -m engine.bench.suite --shape gpt-oss-20b --quant MXFP4_MOE \
    --trace ../resources/traces/gpt-oss-assumed_chat-carry42.npz --tokens 32 --runs 3 --budgets 12 --prompt 512 \
    --arms resident,wisp --out "$OUT/gpt-oss"
echo "== done at $((SECONDS - start)) s"
