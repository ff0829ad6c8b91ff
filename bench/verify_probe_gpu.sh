#!/usr/bin/env bash
# One device call (under 10 minutes): where a speculative decode step's time goes on the GPU, and the GPU tests of the
# speculative paths. Writes OUT_DIR/vp-*/verify_step_probe.json (+ .txt logs) and pytest-spec.txt.
#   bash bench/verify_probe_gpu.sh OUT_DIR        (wheels the device lacks: carry .whl/, see docs/bench.md)
# 1. Qwen3-30B-A3B shape, Q4_K_M, resident, prompt-lookup drafts accepted at 0.6 (bench/verify_step_probe.py);
# 2. tests/gpu of speculation, overlapped steps and the hybrids' chained verify rows;
# 3. Qwen3.5-35B-A3B shape, resident, MTP drafts at 0.8, its draft layer (random weights) run at every proposal;
# 4. Qwen3-30B-A3B at 12 GiB (the wisp plan), drafts at 0.6, while time is left.
set -u
OUT=${1:?OUT_DIR}
mkdir -p "$OUT"
[ -d .whl ] && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site:$PWD
left() { echo $((585 - SECONDS)); }
T=resources/traces/qwen3-published_chat-carry44.npz
python3 -m engine.cli trace synth --shape qwen3.5-35b-a3b --carry-over 0.46 --cover90 130 --top-share 0.0215 \
    --requests 4 --prompt 512 --tokens 96 --seed 1 --out /tmp/q35.npz > /dev/null 2>&1 &
probe() {  # NAME SECONDS ARGS...
    local name=$1 limit=$2 start=$SECONDS
    shift 2
    timeout "$limit" python3 bench/verify_step_probe.py --tokens 64 --runs 3 --fixed 1,2,3,4,6 "$@" \
        --out "$OUT/$name" > "$OUT/$name.txt" 2>&1
    echo "== $name: exit $? after $((SECONDS - start)) s"
    grep -v "^SETTING" "$OUT/$name.txt" | tail -9
}
probe vp-q30-res 150 --shape qwen3-30b-a3b --trace $T --quant Q4_K_M --speculative ngram --accept-rate 0.6
start=$SECONDS
timeout 170 python3 -m pytest -m gpu -p no:xdist -q tests/gpu/test_speculative_gpu.py tests/gpu/test_overlap.py \
    tests/gpu/test_deltanet_step_gpu.py tests/gpu/test_speculative_mtp_gpu.py > "$OUT/pytest-spec.txt" 2>&1
echo "== pytest: exit $? after $((SECONDS - start)) s"; tail -4 "$OUT/pytest-spec.txt"
wait
probe vp-q35-res $(( $(left) < 150 ? $(left) : 150 )) --shape qwen3.5-35b-a3b --trace /tmp/q35.npz --quant Q4_K_M \
    --speculative mtp --accept-rate 0.8 --draft-layer run
[ "$(left)" -gt 60 ] && probe vp-q30-12 "$(left)" --shape qwen3-30b-a3b --trace $T --quant Q4_K_M --budget 12 \
    --speculative ngram --accept-rate 0.6
