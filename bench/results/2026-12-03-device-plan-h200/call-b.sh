#!/usr/bin/env bash
# session 8 call B: the device plan's counting sort: GPU tests, A/B of the resident prompt step, profile
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
python3 -m pip install -q --no-deps .whl/*.whl > $OUT/pip.txt 2>&1 || python3 -m pip install -q --no-deps --break-system-packages .whl/*.whl >> $OUT/pip.txt 2>&1
echo "== gpu tests at $SECONDS"
timeout 170 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/gpu/test_grouped_gemm.py tests/gpu/test_quant_kernels.py::test_providers_give_the_same_bits tests/gpu/test_cuda.py > $OUT/gpu-tests.txt 2>&1
echo "rc $?"; grep -E "^(FAILED|ERROR)|passed|failed" $OUT/gpu-tests.txt | cut -c1-250 | tail -20
T=resources/traces/qwen3-published_chat-carry44.npz
for v in 0 1; do
  echo "== suite WISP_DEVICE_PLAN=$v at $SECONDS"
  WISP_DEVICE_PLAN=$v timeout 150 python3 -m engine.bench.suite --shape qwen3-30b-a3b --quant Q4_K_M --trace $T --arms resident \
    --tokens 32 --runs 3 --prompt 512 --also "--prompt 2048" --label "device plan $v" --out $OUT/ab$v > $OUT/ab$v.txt 2>&1
  echo "rc $?"; grep -o '"prompt": [0-9]*\|"ttft_s": [0-9.]*\|"ttft_s_runs": \[[^]]*\]\|"decode_tok_s": [0-9.]*' $OUT/ab$v.txt | paste -sd' ' | sed 's/"prompt"/\n"prompt"/g'
done
echo "== profile at $SECONDS"
timeout $((520 - SECONDS)) python3 -m bench.prefill_profile --out $OUT/pp --prompts 512,2048 --no-suite > $OUT/pp.txt 2>&1
echo "rc $?"; grep '"prompt step"\|"profiled step"' $OUT/pp.txt | cut -c1-700
echo "== end $SECONDS"
cd $OUT && tar czf all.tgz pp ab0 ab1 && rm -rf pp ab0 ab1
