#!/usr/bin/env bash
# Issue 36, paged prefill near the link floor: the pager's lookahead (engine/experts/pager/lookahead.py) off and on,
# in one run on the GPU machine (bench/results/2026-12-02-prefill-overlap/NOTES.md):
#   bash bench/prefill_overlap_h200.sh OUT_DIR          # about 130 s, bounded at DEADLINE (150) s
# 1. the lookahead's GPU tests (paged prompt logits bitwise resident's; ring read after its copies, refilled after
#    its reads);
# 2. the WiSP 12 GiB prompt step alone at 512 and 2048 tokens, the lookahead off and on interleaved step by
#    step in one engine (the same-machine A/B);
# 3. `wisp bench` rows (Qwen3-30B-A3B shape, Q4_K_M experts, bf16 dense, trace-driven routing, batch 1, 32 decode
#    tokens, 3 runs): resident, then WiSP 12 GiB with the overlap off and on, at 512 and 2048 tokens;
# then prints both tables (python -m bench.prefill_overlap_table OUT_DIR).
# EXTRA: more bench.prefill_profile arguments, last wins; the CPU check of this script (its GPU tests fail there):
#   EXTRA="--device cpu --shape qwen3-topology-tiny --layers 4 --quant Q8_0 --paged-budget 0.6 --runs 1 --steps 1" \
#       bash bench/prefill_overlap_h200.sh /tmp/overlap-cpu
set -u
OUT=${1:?usage: bench/prefill_overlap_h200.sh OUT_DIR}
DEADLINE=${DEADLINE:-150}
start=$SECONDS
left() { echo $((DEADLINE - (SECONDS - start))); }
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$OUT/log.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" 2>&1 | tee -a "$OUT/log.txt"

echo "== GPU tests ($(left) s left)"
timeout 40 python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu/test_prefill_lookahead.py >> "$OUT/log.txt" 2>&1
echo "tests/gpu/test_prefill_lookahead.py: exit $? ($(tail -1 "$OUT/log.txt"))"

echo "== prompt steps and wisp bench rows ($(left) s left)"
timeout $(( $(left) - 6 )) python3 -m bench.prefill_profile --out "$OUT/profile" --prompts 512,2048 --overlap 0,1 \
    --paged-budget 12 --budgets 12 --arms resident,wisp --no-profile --suite-deadline $(( $(left) - 40 )) \
    ${EXTRA:-} >> "$OUT/log.txt" 2>&1
echo "bench.prefill_profile: exit $?"
grep -E "Error|error:" "$OUT/log.txt" | grep -v '"what"' | tail -3
python3 -m bench.prefill_overlap_table "$OUT" 2>&1 | tee "$OUT/tables.md"
echo "== done at $((SECONDS - start)) s"
