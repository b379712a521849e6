import os
import signal

import pytest

# Stages run with one OpenMP thread (their environment says so). So does the
# test process, before the plugin below imports torch: its in-process
# sessions fork candidate workers as a stage does, and a forked OpenMP pool
# can hang the child (the worker is then started afresh, which is slower).
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Started in the background of a non-interactive shell, the suite inherits
# SIGINT ignored, and so would every process it starts (Python keeps an
# ignored SIGINT ignored): the stop protocol's SIGINT would reach none of
# the stages and clusters the tests start, as it does from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The correctness plugin adds --override, --override-config, --list-overrides,
# --gemswatch-record and --output, and records candidate_calls per test case;
# upstream_spellings lets this checkout take upstream's --record as well.
pytest_plugins = ["gemswatch.testing.correctness", "gemswatch.testing.upstream_spellings"]

# Cases shared by an operator family live in a helper module; rewrite its
# asserts like a test module's, so a failure shows both values.
pytest.register_assert_rewrite("_softmax_family")
