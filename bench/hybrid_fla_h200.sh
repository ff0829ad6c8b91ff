#!/usr/bin/env bash
# The gated delta rule on fla's Triton kernels (the engine's choice where fla imports) on the H200:
#   bash bench/hybrid_fla_h200.sh OUT_DIR
# 0. installs fla-core (and einops, which it imports) from the wheels in .whl/ beside the repo's files when they do
#    not import (the H200 has no network; run with carry [".whl"]); 1. tests/gpu/test_hybrid_fla.py; 2. one
#    qwen3.5-35b-a3b DeltaNet layer's conv, chunked form (512 and 2048 tokens) and decode step (batch 1 and 8), torch
#    against fla with the pinned configurations (engine/model/fla_configs); 3. if time is left, fla autotuned
#    (FLA_CACHE_MODE=disabled) and the configurations it picks. Everything stops by END_S (115) seconds.
set -u
OUT=${1:?usage: bench/hybrid_fla_h200.sh OUT_DIR}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
WHEELS="$(cd "$(dirname "$0")/.." && pwd)/.whl"
END=$((SECONDS + ${END_S:-115}))
left() {  # the smaller of $1 seconds and what is left of END_S (at least 1)
    local rest=$((END - SECONDS)); [ "$rest" -lt 1 ] && rest=1; [ "$1" -lt "$rest" ] && echo "$1" || echo "$rest"
}
install_wheel() {  # a module that does not import, and the wheel's name pattern in $WHEELS
    python3 -c "import $1" 2>/dev/null && return
    local wheel; wheel=$(ls "$WHEELS"/$2 2>/dev/null | head -1)
    [ -n "$wheel" ] || { echo "$1 missing and no $WHEELS/$2"; return; }
    python3 -m pip install -q --no-deps --no-index "$wheel" > "$OUT/pip-$1.txt" 2>&1 \
        || python3 -m pip install -q --no-deps --no-index --break-system-packages "$wheel" >> "$OUT/pip-$1.txt" 2>&1
    echo "installed $(basename "$wheel"): rc $?"
}
install_wheel einops 'einops-*.whl'
install_wheel fla 'fla_core-*.whl'
python3 -c "import torch, triton, fla, fla.ops.gated_delta_rule
print('torch', torch.__version__, 'triton', triton.__version__, 'fla', fla.__version__)" 2>&1 | tail -1

timeout $(left ${TESTS_S:-85}) python3 -m pytest -q -s -p no:cacheprovider -m gpu tests/gpu/test_hybrid_fla.py \
    --durations=5 > "$OUT/gpu-tests.txt" 2>&1
echo "tests rc $? at ${SECONDS}s"
grep -oE "(chunked T=2048|recurrent) .*" "$OUT/gpu-tests.txt" | cut -c1-200  # max |fla - torch| / max |torch|
grep -E "passed|failed|error" "$OUT/gpu-tests.txt" | tail -3 | cut -c1-300

timeout $(left ${TIMING_S:-25}) python3 bench/hybrid_fla_timing.py --out "$OUT/timing-pinned.json" \
    > "$OUT/timing-pinned.txt" 2>&1
echo "timing (pinned) rc $? at ${SECONDS}s"
cat "$OUT/timing-pinned.txt" | tail -8 | cut -c1-300

if [ $((END - SECONDS)) -gt 20 ]; then
    FLA_CACHE_MODE=disabled timeout $(left 60) python3 bench/hybrid_fla_timing.py --out "$OUT/timing-autotuned.json" \
        > "$OUT/timing-autotuned.txt" 2>&1
    echo "timing (autotuned) rc $? at ${SECONDS}s"
    cat "$OUT/timing-autotuned.txt" | tail -14 | cut -c1-300
fi
