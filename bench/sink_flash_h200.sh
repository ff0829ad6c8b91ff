#!/usr/bin/env bash
# Prefill attention with sinks and a sliding window on the Triton flash kernel (engine.model.sink_flash), on the H200:
#   bash bench/sink_flash_h200.sh OUT_DIR
# 1. tests/gpu/test_sink_flash.py: the kernel at gpt-oss-20b's head shapes against the torch formula, bits repeat;
# 2. one gpt-oss-20b layer's prompt attention, torch formula against the kernel, at 512, 2,048 and 8,192 tokens on a
#    full and a sliding layer (bench/sink_flash_timing.py);
# 3. tests/gpu/test_gpt_oss.py: the tiny gpt-oss engine, now with the kernel in its prompts, against transformers
#    and against the torch formula (--attention sdpa). Everything stops by END_S (100) seconds.
set -u
OUT=${1:?usage: bench/sink_flash_h200.sh OUT_DIR}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
END=$((SECONDS + ${END_S:-100}))
left() {  # the smaller of $1 seconds and what is left of END_S (at least 1)
    local rest=$((END - SECONDS)); [ "$rest" -lt 1 ] && rest=1; [ "$1" -lt "$rest" ] && echo "$1" || echo "$rest"
}
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__,
      torch.cuda.get_device_name())"
echo "== tests/gpu/test_sink_flash.py"
timeout "$(left 30)" python3 -m pytest -q -m gpu -s tests/gpu/test_sink_flash.py > "$OUT/test_sink_flash.txt" 2>&1
echo "rc $?"; grep -E "max error|passed|failed|Error" "$OUT/test_sink_flash.txt" | tail -12
echo "== one gpt-oss-20b layer's prompt attention (bf16, sinks), median of 5"
timeout "$(left 25)" python3 bench/sink_flash_timing.py "$OUT/timing.json" 2>&1 | tee "$OUT/timing.txt"
echo "== tests/gpu/test_gpt_oss.py"
timeout "$(left 60)" python3 -m pytest -q -m gpu -s tests/gpu/test_gpt_oss.py > "$OUT/test_gpt_oss.txt" 2>&1
echo "rc $?"; grep -E "greedy tokens|passed|failed|Error" "$OUT/test_gpt_oss.txt" | tail -12
echo "total $SECONDS s"
