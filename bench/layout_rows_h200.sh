#!/usr/bin/env bash
# The layout before/after rows: `wisp bench` on two source trees (.old: a782dc2; .new: a782dc2 with the families
# and source branches merged, nothing else), then the GPU tests. Run from the repo root on the H200:
#   bash bench/layout_rows_h200.sh      (WISP_GGUF_DIR files in .leadgpu/peak50, see tests/gguf/peaked.py)
set -u
export PYTHONUNBUFFERED=1
ROOT=$PWD
TRACE=$ROOT/resources/traces/qwen3-published_chat-carry44.npz
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
row() {  # name dir
    local name=$1 dir=$2
    (cd "$dir" && PYTHONPATH=/tmp/site:$ROOT/$dir timeout ${ROW_S:-160} python3 -m engine.bench.suite --shape qwen3-30b-a3b \
        --quant Q4_K_M --trace "$TRACE" --budgets 12 --prompt 512 --tokens 64 --runs 3 --arms resident,wisp \
        --label "$name" --out "$OUT/$name" > "$OUT/$name.txt" 2>&1)
    echo "== $name rc=$? $(date +%T)"; tail -4 "$OUT/$name.txt" | cut -c1-300
}
row before .old
row after .new
(cd $OUT && tar czf rows.tgz before after before.txt after.txt && rm -rf before after)
export PYTHONPATH=/tmp/site:$ROOT
WISP_GGUF_DIR=$ROOT/.leadgpu timeout ${TESTS_S:-250} python3 -m pytest -v -p no:cacheprovider -m gpu \
    tests/gpu/test_hybrid.py tests/gpu/test_gguf_engine.py tests/gpu/test_cuda.py tests/gpu/test_host_tier_cuda.py \
    tests/gpu/test_glm4_moe.py tests/gpu/test_mla.py tests/gpu/test_gpt_oss.py tests/gpu/test_cuda_errors.py \
    tests/gpu/test_sampling_cuda.py tests/gpu/test_mxfp4.py tests/gpu/test_grouped_gemm.py > $OUT/gpu_tests.log 2>&1
echo "tests rc=$? $(date +%T)"; grep -c PASSED $OUT/gpu_tests.log; grep -E "FAILED|ERROR|passed|failed" $OUT/gpu_tests.log | tail -15 | cut -c1-300
