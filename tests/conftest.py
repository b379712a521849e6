import os

import pytest

# Stages run with one OpenMP thread (their environment says so). So does the
# test process, before the plugin below imports torch: its in-process
# sessions fork candidate workers as a stage does, and a forked OpenMP pool
# can hang the child (the worker is then started afresh, which is slower).
os.environ.setdefault("OMP_NUM_THREADS", "1")

# The correctness plugin adds --override, --override-config, --list-overrides,
# --gemswatch-record and --output, and records candidate_calls per test case;
# upstream_spellings lets this checkout take upstream's --record as well.
pytest_plugins = ["gemswatch.testing.correctness", "gemswatch.testing.upstream_spellings"]

# Cases shared by an operator family live in a helper module; rewrite its
# asserts like a test module's, so a failure shows both values.
pytest.register_assert_rewrite("_softmax_family")
