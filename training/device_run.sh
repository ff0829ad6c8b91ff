#!/usr/bin/env bash
# One H200 call: train the demo model and the three topology twins concurrently (each is
# launch-bound, so they share the GPU well), record every twin's trace workloads, and pack the
# results into at most 8 files under $OUT. Needs .corpus/ (carried: python -m training.dataset).
# Usage: bash training/device_run.sh [PRESET...]   (default: all four)
set -u
export PYTHONUNBUFFERED=1
RUN=/tmp/wisp_run
mkdir -p "$RUN/traces"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"
PRESETS=("$@")
[ ${#PRESETS[@]} -gt 0 ] || PRESETS=(demo qwen3-twin olmoe-twin mixtral-twin)
for preset in "${PRESETS[@]}"; do
  python3 -m training.train --out "$RUN/$preset" --preset "$preset" --traces "$RUN/traces" \
    > "$RUN/$preset.log" 2>&1 &
done
wait
tail -n 3 "$RUN"/*.log
[ -f "$RUN/demo/model.safetensors" ] && split -b 15m "$RUN/demo/model.safetensors" "$OUT/demo_model.safetensors.part_"
tar -czf "$OUT/results.tar.gz" -C "$RUN" --exclude=model.safetensors .
ls -la "$OUT"
