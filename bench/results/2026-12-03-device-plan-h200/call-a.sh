#!/usr/bin/env bash
# session 8 call A: resident prompt step profile at 512 (current tree), hybrid overlap GPU test
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
python3 -m pip install -q --no-deps .whl/*.whl > $OUT/pip.txt 2>&1 || python3 -m pip install -q --no-deps --break-system-packages .whl/*.whl >> $OUT/pip.txt 2>&1
echo "== hybrid overlap test at $SECONDS"
timeout 150 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/gpu/test_overlap.py > $OUT/overlap-tests.txt 2>&1
echo "rc $?"; grep -E "^(PASSED|FAILED|ERROR)|passed|failed" $OUT/overlap-tests.txt | cut -c1-250 | tail -20
echo "== profile at $SECONDS"
timeout $((480 - SECONDS)) python3 -m bench.prefill_profile --out $OUT/pp --prompts 512,2048 --arms resident --runs 3 --tokens 32 --suite-deadline 100 > $OUT/pp.txt 2>&1
echo "rc $?"; grep '^{' $OUT/pp.txt | cut -c1-600 | grep -v '"what": "run"' | head -30; tail -3 $OUT/pp.txt | cut -c1-300
echo "== end $SECONDS"
cd $OUT && tar czf all.tgz pp && rm -rf pp
