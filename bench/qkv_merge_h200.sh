#!/usr/bin/env bash
# One decode GEMV launch for an attention's q, k and v (engine/quant/merged_projections.py, issue 37) on the H200:
#   [WISP_GGUF_DIR=DIR] bash bench/qkv_merge_h200.sh OUT_DIR
# (DIR/peak50: the tiny GGUF files made with llama.cpp, tests/gguf/peaked.py; without it the test makes them.)
# 1. tests/gpu/test_merged_projections.py: a merged layer's bits against the separate layers' (decode GEMVs,
#    quant_matmul, dequantized GEMMs) and the engine's tokens and logprobs without and with merge_qkv;
# 2. profile_decode's resident decode step on the synthetic Qwen3-30B-A3B with llama.cpp's Q4_K_M dense types
#    (attn_v Q6_K in the use_more_bits layers: q+k merged there, q+k+v elsewhere), merge_qkv off then on in one
#    process: decode tok/s, graph_replay_ms, launches per step and the quantized GEMV launches per layer.
set -u
OUT=${1:?usage: bench/qkv_merge_h200.sh OUT_DIR}
LIMIT_S=${LIMIT_S:-120}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
TRACE=resources/traces/qwen3-published_chat-carry44.npz
left() { echo $((LIMIT_S - SECONDS)); }
echo "== tests ($SECONDS s)"
timeout ${TESTS_S:-45} python -m pytest -v -rP -p no:cacheprovider -m gpu tests/gpu/test_merged_projections.py \
    > "$OUT/gpu-tests.txt" 2>&1
echo "passed $(grep -c PASSED "$OUT/gpu-tests.txt") failed $(grep -c FAILED "$OUT/gpu-tests.txt")"
grep -E "^(FAILED|ERROR)|bitwise:|passed|failed" "$OUT/gpu-tests.txt" | tail -8 | cut -c1-300
echo "== profile ($SECONDS s)"
timeout $(( $(left) - 3 )) python -m bench.profile_decode --quant Q4_K_M --trace $TRACE --arms resident \
    --tokens 32 --prompt 512 --merge-qkv 0,1 --out "$OUT/profile.json" > "$OUT/profile.txt" 2>&1
echo "profile rc=$?"
python - "$OUT/profile.txt" "$OUT/profile.json" <<'PY'
import json, os, sys
tables, merge = {}, None
for line in open(sys.argv[1]):
    if line.startswith("{"):
        row = json.loads(line)
        if "tables" in row:
            merge = row["merge_qkv"]
        elif "launches_per_step" in row:
            steps = row["decode_steps"]
            gemv = sum(k["count"] for k in row["kernels"] if "gemv" in k["name"]) / steps / 48
            tables[merge] = (row["launches_per_step"], gemv, row["kernel_us_per_step"])
for row in json.load(open(sys.argv[2])) if os.path.exists(sys.argv[2]) else []:
    print(f"merge_qkv={row['merge_qkv']}: decode {row['decode_tok_s']:.1f} tok/s, step {row['step_ms']:.3f} ms, "
          f"graph_replay {row['graph_replay_ms']:.3f} ms, launch {row['launch_us']} us")
for merge, (launches, gemv, us) in tables.items():
    print(f"merge_qkv={merge}: {launches:.1f} launches/step, {gemv:.2f} GEMV launches/layer, kernel {us:.0f} us/step")
PY
tail -2 "$OUT/profile.txt" | cut -c1-300
echo "== done ($SECONDS s)"
