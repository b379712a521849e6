python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD
rm -rf .gemswatch
python3 -m gemswatch.watch run --plain --benchmark auto 2>&1 | tee $OUT/bundled-worker.txt | tail -3
for f in .gemswatch/runs/*/benchmark.json; do d=$(basename $(dirname $f)); cp $f $OUT/bench-worker-${d#*-*-}.json; done
timeout 150 python3 scripts/corpus_run.py good_benchmarked.py slows_the_clock.py fakes_the_windows.py garbage_when_timed.py reads_its_stage.py calls_itself.py wrong_dtype.py 2>&1 | tee $OUT/corpus-bench.txt | tail -12
timeout 200 python3 scripts/loop_benchmark.py --only f --repeat 3 2>&1 | tee $OUT/loop-f.txt | tail -8
