#!/usr/bin/env bash
# One batched run of everything that needs the GPU, for a scarce GPU lease:
# environment, the accuracy suite, the benchmarks (core, then comprehensive)
# as JSON, and the loop benchmark's warm-start and save-to-verdict figures.
#   scripts/gpu_check.sh OUTDIR [STEPS]    STEPS: any of e a c C l (default: eacCl)
# Each step has a time limit (seconds, env GPU_CHECK_<STEP>_S) so one slow step
# cannot eat the lease; what finished is in OUTDIR either way.
set -uo pipefail
out=${1:?usage: scripts/gpu_check.sh OUTDIR [STEPS]}
steps=${2:-eacCl}
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
step() { [[ $steps == *$1* ]]; }

if step e; then
    { date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
      $py -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"; } > "$out/env.txt" 2>&1
fi
if step a; then
    timeout "${GPU_CHECK_A_S:-240}" $py -m pytest -q -p no:cacheprovider tests/test_*.py > "$out/accuracy.txt" 2>&1
    echo "exit $?" >> "$out/accuracy.txt"
fi
if step c; then
    timeout "${GPU_CHECK_C_S:-180}" $py -m pytest -q -p no:cacheprovider benchmark --level core \
        --warmup "${GPU_CHECK_WARMUP:-25}" --iter "${GPU_CHECK_ITER:-100}" \
        --record json --output "$out/bench_core.json" > "$out/bench_core.txt" 2>&1
    echo "exit $?" >> "$out/bench_core.txt"
fi
if step C; then
    timeout "${GPU_CHECK_CC_S:-420}" $py -m pytest -q -p no:cacheprovider benchmark --level comprehensive \
        --warmup "${GPU_CHECK_WARMUP:-25}" --iter "${GPU_CHECK_ITER:-100}" \
        --record json --output "$out/bench_comprehensive.json" > "$out/bench_comprehensive.txt" 2>&1
    echo "exit $?" >> "$out/bench_comprehensive.txt"
fi
if step l; then
    timeout "${GPU_CHECK_L_S:-240}" $py scripts/loop_benchmark.py --only ab --repeat "${GPU_CHECK_REPEAT:-2}" > "$out/loop.txt" 2>&1
    echo "exit $?" >> "$out/loop.txt"
fi
tail -n 3 "$out"/*.txt
