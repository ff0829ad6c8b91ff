#!/usr/bin/env bash
# session 8 call C: prefill GQA A/B, dense tile sweep at 512 rows, GPU tests of the device plan
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
python3 -m pip install -q --no-deps .whl/*.whl > $OUT/pip.txt 2>&1 || python3 -m pip install -q --no-deps --break-system-packages .whl/*.whl >> $OUT/pip.txt 2>&1
T=resources/traces/qwen3-published_chat-carry44.npz
for v in 0 1; do
  echo "== suite WISP_PREFILL_GQA=$v at $SECONDS"
  WISP_PREFILL_GQA=$v timeout 120 python3 -m engine.bench.suite --shape qwen3-30b-a3b --quant Q4_K_M --trace $T --arms resident \
    --tokens 32 --runs 3 --prompt 512 --also "--prompt 2048" --label "prefill gqa $v" --out $OUT/gqa$v > $OUT/gqa$v.txt 2>&1
  echo "rc $?"; grep -o '"prompt": [0-9]*\|"ttft_s": [0-9.]*\|"ttft_s_runs": \[[^]]*\]\|"decode_tok_s": [0-9.]*' $OUT/gqa$v.txt | paste -sd' ' | sed 's/"prompt"/\n"prompt"/g'
  tail -2 $OUT/gqa$v.txt | cut -c1-200
done
echo "== dense sweep at $SECONDS"
SKIP_SUITE=1 TESTS_S=40 TIMING_S=25 END_S=190 TILE_SWEEP="64,64,4,3 64,64,8,3 64,128,8,3 128,128,8,2 128,32,8,2" bash bench/dense_gemm_h200.sh $OUT/dense 2>&1 | grep -v '"M": 2048' | cut -c1-260
echo "== gpu tests at $SECONDS"
timeout $((470 - SECONDS)) python3 -m pytest -q -rf -p no:cacheprovider -m gpu tests/gpu/test_grouped_gemm.py tests/gpu/test_quant_kernels.py::test_providers_give_the_same_bits > $OUT/gpu-tests.txt 2>&1
echo "rc $?"; tail -4 $OUT/gpu-tests.txt | cut -c1-250
echo "== gqa engine test at $SECONDS"
WISP_PREFILL_GQA=1 timeout $((550 - SECONDS)) python3 -m pytest -q -rf -x -p no:cacheprovider -m gpu tests/gpu/test_cuda.py > $OUT/gqa-tests.txt 2>&1
echo "rc $?"; tail -4 $OUT/gqa-tests.txt | cut -c1-250
echo "== end $SECONDS"
cd $OUT && tar czf all.tgz gqa0 gqa1 dense && rm -rf gqa0 gqa1 dense
