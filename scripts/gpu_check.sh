#!/usr/bin/env bash
# One batched run of everything that needs the GPU, for a scarce GPU lease:
#   e  environment            a  the accuracy suite
#   c  core benchmark (JSON)  C  comprehensive benchmark (JSON)
#   s  spread: core three times back to back (the first fills Triton's
#      compile cache; compare the other two with scripts/perf_tables.py)
#   t  scripts/timer_check.py g  scripts/gpu_session.py loop
#   l  the loop benchmark's warm-start and save-to-verdict figures
#   w  scripts/tune_sweep.py
#   o  every operator's preflight with the bundled kernels as the candidate
#      (scripts/library_candidate.py: the accuracy rule on the GPU shapes)
#   r  `gemswatch run candidates/ --json --benchmark auto` in a scratch copy:
#      the bundled candidates through all three stages (no false failure),
#      with the timer check's trace of every chunk (timer_trace.jsonl)
#   h  scripts/host_overhead.py --part both, and a profile of the products' host path
#   p  `gemswatch profile` of each bundled candidate's worst case (after r, in
#      its scratch copy: ncu where it works, else the torch profiler)
#   scripts/gpu_check.sh OUTDIR [STEPS]    (default: eacCl)
# Each step has a time limit (seconds, env GPU_CHECK_<STEP>_S) so one slow step
# cannot eat the lease; what finished is in OUTDIR either way.
set -uo pipefail
out=${1:?usage: scripts/gpu_check.sh OUTDIR [STEPS]}
steps=${2:-eacCl}
mkdir -p "$out"
abs_out=$(realpath "$out")  # for the steps that run in a scratch copy
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
step() { [[ $steps == *$1* ]]; }

if step e; then
    { date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
      $py -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"; } > "$out/env.txt" 2>&1
fi
if step a; then
    timeout "${GPU_CHECK_A_S:-420}" $py -m pytest -q -p no:cacheprovider tests/test_*.py > "$out/accuracy.txt" 2>&1
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
if step s; then
    for i in 0 1 2; do
        timeout "${GPU_CHECK_S_S:-200}" $py -m pytest -q -p no:cacheprovider benchmark --level core \
            --warmup "${GPU_CHECK_WARMUP:-25}" --iter "${GPU_CHECK_ITER:-100}" \
            --record json --output "$out/spread_$i.json" > "$out/spread_$i.txt" 2>&1
        echo "exit $?" >> "$out/spread_$i.txt"
    done
fi
if step t; then
    timeout "${GPU_CHECK_T_S:-120}" $py scripts/timer_check.py > "$out/timer_check.txt" 2>&1
    echo "exit $?" >> "$out/timer_check.txt"
fi
if step g; then
    timeout "${GPU_CHECK_G_S:-300}" $py scripts/gpu_session.py "$out" loop > "$out/gpu_session.txt" 2>&1
    echo "exit $?" >> "$out/gpu_session.txt"
fi
if step w; then
    timeout "${GPU_CHECK_W_S:-300}" $py scripts/tune_sweep.py > "$out/tune_sweep.txt" 2>&1
    echo "exit $?" >> "$out/tune_sweep.txt"
fi
if step o; then
    overrides=()
    for op in $($py -c "import sys; sys.path.insert(0, 'scripts'); import library_candidate as c; print(*c.OPERATORS)"); do
        overrides+=(--override "$op:scripts/library_candidate.py:$op")
    done
    timeout "${GPU_CHECK_O_S:-300}" $py -m pytest -q -p no:cacheprovider benchmark --preflight-only --level core \
        "${overrides[@]}" --output "$out/preflight_library.json" > "$out/preflight_library.txt" 2>&1
    echo "exit $?" >> "$out/preflight_library.txt"
fi
if step r; then
    rm -rf /tmp/gpu-check-project && cp -r . /tmp/gpu-check-project
    (cd /tmp/gpu-check-project && GEMSWATCH_TIMER_TRACE="$abs_out/timer_trace.jsonl" \
        timeout "${GPU_CHECK_R_S:-240}" gemswatch run candidates/ --json --benchmark auto \
        > "$abs_out/run.jsonl" 2> "$abs_out/run.txt"; echo "exit $?" >> "$abs_out/run.txt")
fi
if step p; then
    for f in candidates/*.py; do
        (cd /tmp/gpu-check-project && timeout "${GPU_CHECK_P_S:-120}" gemswatch profile "$f" \
            >> "$abs_out/profile.txt" 2>&1; echo "$f exit $?" >> "$abs_out/profile.txt")
    done
fi
if step h; then
    timeout "${GPU_CHECK_H_S:-200}" $py scripts/host_overhead.py --part both > "$out/host_overhead.txt" 2>&1
    echo "exit $?" >> "$out/host_overhead.txt"
    # Where the matrix products' 66-82 us of our own Python go (the H200, 2026-12-02).
    timeout 60 $py scripts/host_overhead.py --part b --ops mm,addmm --profile 40 > "$out/host_profile_mm.txt" 2>&1
fi
if step l; then
    timeout "${GPU_CHECK_L_S:-240}" $py scripts/loop_benchmark.py --only ab --repeat "${GPU_CHECK_REPEAT:-2}" > "$out/loop.txt" 2>&1
    echo "exit $?" >> "$out/loop.txt"
fi
tail -n 3 "$out"/*.txt
