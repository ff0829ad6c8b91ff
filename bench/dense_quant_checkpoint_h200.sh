#!/usr/bin/env bash
# --dense-quant q8_0 on bf16 checkpoints, on the H200: bash bench/dense_quant_checkpoint_h200.sh OUT_DIR
# 1. The GPU tests (tests/gpu/test_dense_quant_checkpoint.py): expert modes bitwise with Q8_0 dense weights, logits
#    within Q8_0's rounding of bf16's, the CUDA GEMV/GEMM against the CPU reference.
# 2. bench/dense_quant_checkpoint.py: a Qwen3-30B-A3B-width checkpoint (2 layers) with bf16 and Q8_0 dense weights:
#    load seconds, dense GiB held/planned, load peak, TTFT and decode tok/s.
set -u
OUT=${1:?usage: bench/dense_quant_checkpoint_h200.sh OUT_DIR}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
timeout ${TESTS_S:-90} python3 -m pytest -q -s -m gpu tests/gpu/test_dense_quant_checkpoint.py \
    > "$OUT/gpu-tests.txt" 2>&1
echo "gpu tests rc $?"
grep -E "top-1|passed|failed|Error" "$OUT/gpu-tests.txt" | cut -c1-300 | tail -12
timeout ${MEASURE_S:-55} python3 bench/dense_quant_checkpoint.py "$OUT" > "$OUT/measure.txt" 2>&1
echo "measure rc $?"
grep -E '^\{|Error' "$OUT/measure.txt" | cut -c1-400
