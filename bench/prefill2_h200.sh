#!/usr/bin/env bash
# Issue 36, second pass, in one run on the GPU machine (bench/results/2026-12-02-prefill-2/NOTES.md):
#   bash bench/prefill2_h200.sh OUT_DIR
# 1. the grouped kernels' tile sweep on a Q4_K_M layer-step (word tiles off/on, tile shapes), 512/2048/8192 tokens;
# 2. `wisp bench` with the sweep's fastest configuration: resident 512/2048/8192, WiSP 12 GiB 512/2048;
# 3. the GPU tests of the grouped GEMM and of every provider's bits;
# 4. (GPT_OSS=1) the gpt-oss-20b shape with MXFP4 experts, as long as time is left.
set -u
OUT=${1:?usage: bench/prefill2_h200.sh OUT_DIR}
DEADLINE=${DEADLINE:-360}
TRACE=${TRACE:-../resources/traces/qwen3-published_chat-carry44.npz}
start=$SECONDS
left() { echo $((DEADLINE - (SECONDS - start))); }
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
exec > >(tee -a "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"

echo "== tile sweep ($(left) s left)"
timeout 100 python3 bench/prefill_moe_probe.py --sweep --formats Q4_K_M --tokens 512,2048,8192 --out "$OUT"
best=$(python3 - "$OUT/prefill_moe_sweep.json" <<'PY'
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["rows"] if "kernels_ms" in r and r["config"][5]]
total = {}
for r in rows:
    total.setdefault(tuple(r["config"]), []).append(r["kernels_ms"])
full = {c: sum(v) for c, v in total.items() if len(v) == 3}
print(",".join(map(str, min(full, key=full.get)[:5])) if full else "")
PY
)
echo "fastest configuration: ${best:-none (default)}"
PARAMS=${best:+engine.quant.grouped_gemm.TILES=$best}  # the runs below take it (bench/params.py)

SUITE="python3 -m bench.params $PARAMS -- -m engine.bench.suite --shape qwen3-30b-a3b --quant Q4_K_M --trace $TRACE --tokens 32 --runs 3"
echo "== wisp bench ($(left) s left)"
timeout $(( $(left) - 60 )) $SUITE --budgets 12 --prompt 512 --arms resident,wisp --out "$OUT/q4" \
    --also "--prompt 2048" --also "--prompt 8192 --max-len 8448 --arms resident --runs 3"

echo "== GPU tests ($(left) s left)"
timeout $(( $(left) - 3 )) python3 -m bench.params $PARAMS -- -m pytest -m gpu -q -p no:cacheprovider tests/gpu/test_grouped_gemm.py \
    "tests/gpu/test_quant_kernels.py::test_providers_give_the_same_bits" -k "Q4_K_M or Q6_K or bits or word or providers" 2>&1 | tail -15

[ "${GPT_OSS:-0}" = 1 ] && timeout $(( $(left) - 3 )) python3 -m engine.bench.suite --shape gpt-oss-20b --quant MXFP4_MOE \
    --trace ../resources/traces/gpt-oss-assumed_chat-carry42.npz --tokens 32 --runs 3 --budgets 12 --prompt 512 \
    --arms resident,wisp --out "$OUT/gpt-oss"
echo "== done at $((SECONDS - start)) s"
