import pytest

# The correctness plugin adds --override, --override-config, --list-overrides,
# --record and --output, and records candidate_calls per test case.
pytest_plugins = ["gemswatch.testing.correctness"]

# Cases shared by an operator family live in a helper module; rewrite its
# asserts like a test module's, so a failure shows both values.
pytest.register_assert_rewrite("_softmax_family")
