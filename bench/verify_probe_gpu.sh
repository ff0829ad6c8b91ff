#!/usr/bin/env bash
# One device call (under 10 minutes): a speculative decode step's time on the GPU with the MTP draft layer's own
# cost in, and the GPU tests that gate the graphed draft steps. Writes OUT_DIR/vp-*/verify_step_probe.json (+ .txt
# logs) and pytest-spec.txt.
#   bash bench/verify_probe_gpu.sh OUT_DIR        (wheels the device lacks: carry .whl/, see docs/bench.md)
# 1. the graphed draft steps against the eager ones, and the demo's draft layer, on CUDA (tests/gpu);
# 2. Qwen3.5-35B-A3B shape, Q4_K_M, resident, MTP drafts at 0.8, its draft layer (random weights) run eagerly at
#    every proposal (bench/verify_step_probe.py --draft-layer run);
# 3. the same with the drafts after the first as CUDA graph replays (--draft-layer graphs);
# 4. the same at 12 GiB (the wisp plan), eager draft layer, while time is left.
# The Qwen3-30B-A3B rows of 2026-12-07 (bench/results/2026-12-07-wave10-h100) came from this script's earlier form:
#   python3 bench/verify_step_probe.py --shape qwen3-30b-a3b --trace resources/traces/qwen3-published_chat-carry44.npz \
#       --quant Q4_K_M --speculative ngram --accept-rate 0.6 [--budget 12] --tokens 64 --runs 3 --fixed 1,2,3,4,6
set -u
OUT=${1:?OUT_DIR}
mkdir -p "$OUT"
[ -d .whl ] && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site:$PWD
left() { echo $((585 - SECONDS)); }
python3 -m engine.cli trace synth --shape qwen3.5-35b-a3b --carry-over 0.46 --cover90 130 --top-share 0.0215 \
    --requests 4 --prompt 512 --tokens 96 --seed 1 --out /tmp/q35.npz > /dev/null 2>&1 &
probe() {  # NAME SECONDS ARGS...
    local name=$1 limit=$2 start=$SECONDS
    shift 2
    timeout "$limit" python3 bench/verify_step_probe.py --tokens 64 --runs 3 --fixed 1,2,3,4 "$@" \
        --out "$OUT/$name" > "$OUT/$name.txt" 2>&1
    echo "== $name: exit $? after $((SECONDS - start)) s"
    grep -v "^SETTING" "$OUT/$name.txt" | tail -8
}
start=$SECONDS
timeout 200 python3 -m pytest -m gpu -p no:xdist -q tests/gpu/test_mtp_draft_graphs_gpu.py \
    "tests/gpu/test_speculative_mtp_gpu.py::test_the_demos_draft_layer_is_lossless_on_cuda" > "$OUT/pytest-spec.txt" 2>&1
echo "== pytest: exit $? after $((SECONDS - start)) s"; tail -4 "$OUT/pytest-spec.txt"
wait
Q35=(--shape qwen3.5-35b-a3b --trace /tmp/q35.npz --quant Q4_K_M --speculative mtp --accept-rate 0.8)
probe vp-q35-res 130 "${Q35[@]}" --draft-layer run
probe vp-q35-res-graphs 130 "${Q35[@]}" --draft-layer graphs
[ "$(left)" -gt 60 ] && probe vp-q35-12 "$(left)" "${Q35[@]}" --budget 12 --draft-layer run
