#!/usr/bin/env bash
# session 8 call D: the resident prompt rows on the final tree (device plan + prefill GQA), GQA off between (A/B/A)
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
python3 -m pip install -q --no-deps .whl/*.whl > $OUT/pip.txt 2>&1 || python3 -m pip install -q --no-deps --break-system-packages .whl/*.whl >> $OUT/pip.txt 2>&1
T=resources/traces/qwen3-published_chat-carry44.npz
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,utilization.gpu,temperature.gpu --format=csv
for run in on1 off on2; do
  [ $run = off ] && g=0 || g=1
  echo "== suite $run (WISP_PREFILL_GQA=$g) at $SECONDS"
  WISP_PREFILL_GQA=$g timeout 95 python3 -m engine.bench.suite --shape qwen3-30b-a3b --quant Q4_K_M --trace $T --arms resident \
    --tokens 32 --runs 3 --prompt 512 --also "--prompt 2048" --label "final tree, prefill gqa $g" --out $OUT/$run > $OUT/$run.txt 2>&1
  echo "rc $?"; grep -o '"prompt": [0-9]*\|"ttft_s": [0-9.]*\|"ttft_s_runs": \[[^]]*\]\|"decode_tok_s": [0-9.]*\|"prefill_tok_s": [0-9.]*' $OUT/$run.txt | paste -sd' ' | sed 's/"prompt"/\n"prompt"/g'
done
echo "== end $SECONDS"
cd $OUT && tar czf all.tgz on1 off on2 && rm -rf on1 off on2
