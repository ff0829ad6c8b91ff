#!/usr/bin/env bash
# Warps on rows and persistent grids for the wide decode GEMV (engine/quant/wide_gemv.py) on the H200, in <= 150 s:
#   bash bench/gemv_warps_h200.sh OUT_DIR
# Compiles every variant in parallel processes first (they share Triton's cache), then bench/gemv_warps.py times
# them in one process: base (2 rows a one-warp program), before (the kernel of commit BASE, the one before warps on
# rows), warps on rows W 2/4/8 x 1/2 rows a warp, and persistent grids of each, on the decode step's matrices; it
# checks each output bit for bit against base. Prints the table; its BEST and BITS lines decide.
set -u
OUT=${1:?usage: bench/gemv_warps_h200.sh OUT_DIR}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
BASE=b583b8a  # or BEFORE_FILE=path of that commit's engine/quant/wide_gemv.py where there is no git history
BEFORE=()
if [ -n "${BEFORE_FILE:-}" ]; then
    BEFORE=(--before "$BEFORE_FILE")
elif git show "$BASE:engine/quant/wide_gemv.py" > "$OUT/wide_gemv_before.py" 2>/dev/null; then
    BEFORE=(--before "$OUT/wide_gemv_before.py")
else
    echo "no git history here: the kernel before warps on rows is not timed or checked (set BEFORE_FILE)"
fi
SHARDS=${SHARDS:-14}
for i in $(seq 0 $((SHARDS - 1))); do
    timeout 75 python bench/gemv_warps.py "${BEFORE[@]}" --shard "$i/$SHARDS" > "$OUT/compile-$i.txt" 2>&1 &
done
wait
echo "== compiled ($SECONDS s); $(cat "$OUT"/compile-*.txt | grep -c error) compile errors"
timeout $((148 - SECONDS)) python bench/gemv_warps.py "${BEFORE[@]}" > "$OUT/rows.jsonl" 2> "$OUT/rows.err"
tail -3 "$OUT/rows.err" | cut -c1-300
python bench/gemv_warps.py --table "$OUT/rows.jsonl" | tee "$OUT/table.txt"
echo "== done ($SECONDS s)"
