#!/usr/bin/env bash
# Are the expert arms bitwise identical to resident at the Qwen3-30B-A3B shape on this GPU? (bench.identity)
#   bench/identity_probe.sh [LAYERS [BUDGET_GIB [EXPERIMENTS]]]   default 8 layers at 4 GiB, experiments "1 2 3 4 5 6";
#   48 layers (the whole shape) default to 12 GiB and take 2-3 min per experiment (~80 s of it building the
#   weights): run them in two device calls, e.g. "1 2 3" then "5 6".
# 1. the engine's default (deterministic kernels), every arm, CUDA graphs and the eager path with part checksums;
# 2. a second resident engine only, at the same settings: does a run repeat itself at all at this size?
# 3. NaN in the KV cache, the slots and every new tensor: a NaN logprob means something reads unwritten memory;
# 4. without deterministic kernels (the first runs on 2026-11-29 differed run to run there);
# 5. the order turned round (paged-all first, resident twice after it): is the first engine of a process the
#    odd one, or does something an engine leaves behind change the next ones?
# 6. decode attention by SDPA instead of the engine's Triton kernels (the default since 2026-11-29: with SDPA, a
#    second resident engine already differed from the first at 48 layers).
layers="${1:-8}"
budget="${2:-$([ "$layers" -ge 24 ] && echo 12 || echo 4)}"
experiments=" ${3:-1 2 3 4 5 6} "
run() { [[ "$experiments" == *" $1 "* ]]; }
p="python3 -m bench.identity --shape qwen3-30b-a3b --layers $layers --trace resources/traces/qwen3-twin_code.npz --budget $budget --prompt 512 --tokens 24 --seeds 1 --warmup"
run 1 && echo "== 1. deterministic kernels, every arm" && $p 2>&1 | grep "^{"
run 2 && echo "== 2. resident twice" && $p --arms resident,resident-again 2>&1 | grep "^{"
run 3 && echo "== 3. NaN-filled memory" && $p --arms resident,resident-again,paged-all,wisp --fill-uninitialized 2>&1 | grep "^{"
run 4 && echo "== 4. --nondeterministic" && $p --arms resident,resident-again,paged-all --nondeterministic 2>&1 | grep "^{"
run 5 && echo "== 5. paged-all first" && $p --arms paged-all,resident,static-uva,resident-again 2>&1 | grep "^{"
run 6 && echo "== 6. SDPA decode attention" && $p --arms resident,resident-again,paged-all,wisp,static-uva --attention sdpa --decodes graphs 2>&1 | grep "^{"
true
