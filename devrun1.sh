set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD
python3 -c "from gemswatch.testing.isolation.sandbox import landlock_abi; print('landlock abi', landlock_abi())"; uname -r
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv
python3 -m pytest -q -p no:cacheprovider tests/e2e/test_cuda_timer.py tests/e2e/test_candidate_sandbox.py 2>&1 | tail -5
python3 -m pytest -q -p no:cacheprovider tests/e2e/test_integrity_plugins.py -k "timer or timed or replayed or honest_slow" 2>&1 | tail -5
rm -rf .gemswatch
python3 -m gemswatch.watch run --plain --benchmark auto candidates/ 2>&1 | tee $OUT/bundled-isolated.txt | tail -8
cp .gemswatch/runs/*softmax*/benchmark.json $OUT/softmax-isolated.json; cp .gemswatch/runs/*rms_norm*/benchmark.json $OUT/rms-isolated.json
grep -h "sandbox" .gemswatch/runs/*/benchmark.log | head -2
rm -rf .gemswatch
GEMSWATCH_CANDIDATE_ISOLATION=off python3 -m gemswatch.watch run --plain --benchmark auto candidates/ 2>&1 | tee $OUT/bundled-inprocess.txt | tail -8
cp .gemswatch/runs/*softmax*/benchmark.json $OUT/softmax-inprocess.json; cp .gemswatch/runs/*rms_norm*/benchmark.json $OUT/rms-inprocess.json
