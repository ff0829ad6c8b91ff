#!/usr/bin/env bash
# The `wisp bench` suite on the H200 (docs/design.md), in two parts that each fit one 10-minute device command: the synthetic
# Qwen3-30B-A3B shape, trace-driven, then results.md and the plots. Each step's output also goes to
# OUT_DIR/<step>.log.
#
#   bench/h200_suite.sh [OUT_DIR] [main|splits|shapes|phases|hf|identity]   default: $OUT, else bench/results/<date>-h200; main
# SPLIT_BUDGETS=24 narrows the splits part (default 12,24). PHASES replaces the phases part's budget and workload
# (default "--budget 12 --static-kv 0.75,1.3": bench.phases's workload, bursts of 4 x 7000+64 and chats of
# 2 x 256+128, against the configured split and statics with KV for one and for two of the burst's requests; a
# run of more arms than fit one 10-minute command is split over two with --arms and --static-kv, e.g.
# "--budget 24 --burst 8x6144+16 --chat 3x256+128 --max-len 8192 --arms online,static --static-kv 2.5" then
# "... --arms static --static-kv 4.7,7").
# The weights take ~80 s to build in each part; the main table took ~6.5 min on 2026-11-29. The GPU image lacks
# platformdirs (wisp-online's link probe cache): carry its wheel (see the device tool's README).
#   LABEL="$(git rev-parse --short HEAD) what changed" bench/h200_suite.sh    (the H200's copy has no .git)
# The lent H200 returns at most 8 files from $OUT and the main part writes 17: run it into a subfolder and pack
# that, e.g. bench/h200_suite.sh $OUT/r main; tar czf $OUT/r.tgz -C $OUT r (session 9 lost two JSONs this way).
set -euo pipefail
export PYTHONUNBUFFERED=1

root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-${OUT:-$root/bench/results/$(date +%F)-h200}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$root"  # the package is not installed there: python -m from the repository root
python="${PYTHON:-python3}"
label="${LABEL:-}"

step() {  # step NAME COMMAND...: run COMMAND, its output to the terminal and to $out/NAME.log
    local name=$1
    shift
    echo "== $name: $*" | tee "$out/$name.log"
    "$@" 2>&1 | tee -a "$out/$name.log"
}

gpu_facts() {
    nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current \
        --format=csv || echo "nvidia-smi failed"
    "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
}

suite() {  # suite NAME ARGS...: one `wisp bench` run of the Qwen3 shape (code trace unless --trace is given)
    local name=$1
    shift
    step "$name" "$python" -m engine.bench.suite --shape qwen3-30b-a3b \
        --trace "$code" --label "$label" --out "$out" "$@"
}

part="${2:-main}"
code=resources/traces/qwen3-twin_code.npz
turns=resources/traces/qwen3-twin_multi_turn.npz

step gpu gpu_facts
case "$part" in
main)  # ~7 min: the arms table at 12/24/32 GiB, then TTFT of a 2048-token prompt and batch 4
    suite bench-main --budgets 12,24,32 --batch 1 --prompt 512 --tokens 64 --runs 3 \
        --arms resident,resident-nondeterministic,resident-sdpa-attention,paged-all,wisp,wisp-host,wisp-prefetch,static-uva,static-copy \
        --also "--prompt 2048 --budgets 16 --tokens 16 --runs 1 --arms resident,paged-all,wisp,static-uva" \
        --also "--batch 4 --budgets 24 --tokens 32 --runs 1 --arms resident,wisp,static-uva" ;;
splits)  # ~7 min: MV-WSA's split against measured uniform splits, 50/50 and the online controller
    suite bench-splits --trace "$turns" --budgets "${SPLIT_BUDGETS:-12,24}" --batch 1 --prompt 512 --tokens 48 --runs 3 \
        --arms resident,wisp,wisp-online,wisp-50-50,wisp-sweep ;;
shapes)  # ~3 min: OLMoE-1B-7B (whole) and Mixtral-8x7B (first 8 layers: host RAM) with their own twin traces
    step bench-olmoe "$python" -m engine.bench.suite --shape olmoe-1b-7b --trace resources/traces/olmoe-twin_code.npz \
        --budgets 4,6,8 --tokens 32 --runs 2 --arms resident,paged-all,wisp,static-uva,static-copy --label "$label" --out "$out"
    step bench-mixtral "$python" -m engine.bench.suite --shape mixtral-8x7b --layers 8 \
        --trace resources/traces/mixtral-twin_code.npz --budgets 12,16 --tokens 32 --runs 2 \
        --arms resident,paged-all,wisp,static-uva,static-copy --label "$label" --out "$out" ;;
phases)  # ~7 min: the online controller against static splits on bursts of long requests alternating with chats
    # shellcheck disable=SC2086  # PHASES holds several options
    step phases "$python" -m bench.phases --shape qwen3-30b-a3b --trace "$turns" --cycles 2 --out "$out" \
        ${PHASES:---budget 12 --static-kv 0.75,1.3}
    echo "== done in ${SECONDS}s: $out"
    exit 0 ;;
hf)  # ~3 min: transformers + accelerate offload of the same shape (its own process: a second host copy of the model)
    step hf "$python" -m bench.hf_offload --shape qwen3-30b-a3b --budgets 12,22 --tokens 8 --out "$out"
    echo "== done in ${SECONDS}s: $out"
    exit 0 ;;
identity)  # ~3 min: every arm against resident, bit for bit, at the whole Qwen3 shape (bench.identity)
    step identity "$python" -m bench.identity --shape qwen3-30b-a3b --layers 48 --trace "$code" --budget 12 \
        --arms resident,paged-all,wisp,static-uva --tokens 24 --seeds 1 --warmup || true
    echo "== done in ${SECONDS}s: $out"
    exit 0 ;;
*) echo "part must be main, splits, shapes, phases, hf or identity" >&2; exit 2 ;;
esac
step report "$python" -m bench.report "$out"/*.json --out "$out"
echo "== done in ${SECONDS}s: $out"
