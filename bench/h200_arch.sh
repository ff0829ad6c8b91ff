#!/usr/bin/env bash
# One H200 row each at the gpt-oss-20b and GLM-4.5-Air shapes, in one device call (~4 min):
#   bash bench/h200_arch.sh OUT_DIR
# Synthetic bf16 weights with the published config geometry (engine/model/shapes.py), routing from the
# assumed-locality traces (resources/traces/STATS.md: label the rows "trace-driven, assumed locality").
# Arms: resident, WiSP (MV-WSA split) at a budget that pages, static-UVA at the same budget.
# - gpt-oss-20b: all 24 layers (35.6 GiB of bf16 experts); 12 GiB pages 6 of 32 experts per layer.
# - GLM-4.5-Air: its first 8 layers (dense layer 0 + 7 MoE layers, 28.9 GiB of experts): the whole model is
#   199 GB in bf16, more than the host's 128 GiB. 12 GiB gives 24 of 128 slots per layer, what the whole
#   model gets at ~48 GiB.
# MXFP4=1 adds gpt-oss-20b with its experts MXFP4, as published, at 8 GiB (wisp bench --quant MXFP4_MOE).
# Out: OUT_DIR/arch.tgz (the JSONs and plots), results.md and one log per shape (the device returns 8 files).
set -u  # RUNS=N (default 2) and BENCH_TIMEOUT=S (default 170) per shape fit a shorter call
OUT=${1:?usage: bench/h200_arch.sh OUT_DIR}
mkdir -p "$OUT/arch"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.log"

bench() {  # bench NAME ARGS...: one `wisp bench` process, its log to OUT/NAME.log
    local name=$1
    shift
    timeout "${BENCH_TIMEOUT:-170}" python -m engine.bench.suite "$@" --arms resident,wisp,static-uva --prompt 512 --tokens 32 \
        --runs "${RUNS:-2}" --label "trace-driven, assumed locality" --out "$OUT/arch" 2>&1 | cut -c1-400 > "$OUT/$name.log"
    tail -5 "$OUT/$name.log"
}

bench gpt-oss --shape gpt-oss-20b --trace resources/traces/gpt-oss-assumed_chat-carry42.npz --budgets 12
bench glm --shape glm-4.5-air --layers 8 --trace resources/traces/glm45air-assumed_chat-carry30.npz --budgets 12
if [ "${MXFP4:-0}" = 1 ]; then  # gpt-oss-20b as published (MXFP4 experts, ~1 min more): needs --quant MXFP4_MOE
    bench gpt-oss-mxfp4 --shape gpt-oss-20b --quant MXFP4_MOE \
        --trace resources/traces/gpt-oss-assumed_chat-carry42.npz --budgets 8
fi
python -m bench.report "$OUT"/arch/*.json --out "$OUT/arch" > /dev/null 2>&1
cp "$OUT/arch/results.md" "$OUT/results.md" 2>/dev/null && cat "$OUT/results.md"
tar czf "$OUT/arch.tgz" -C "$OUT" arch && rm -rf "$OUT/arch"
echo "== done in ${SECONDS}s"
