python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD
python3 -m pytest -q -p no:cacheprovider tests/e2e/test_integrity_plugins.py tests/e2e/test_cuda_timer.py 2>&1 | grep -E "^E |passed|failed" | head -8
for iso in worker off; do
  rm -rf .gemswatch
  GEMSWATCH_CANDIDATE_ISOLATION=$iso python3 -m gemswatch.watch run --plain --benchmark auto 2>&1 | tee $OUT/bundled-$iso.txt | tail -8
  for f in .gemswatch/runs/*/benchmark.json; do d=$(basename $(dirname $f)); cp $f $OUT/bench-$iso-${d#*-*-}.json; done
done
timeout 330 python3 scripts/corpus_run.py 2>&1 | tee $OUT/corpus.txt | tail -12
