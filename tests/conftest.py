# The correctness plugin adds --override, --override-config, --list-overrides,
# --record and --output, and records candidate_calls per test case.
pytest_plugins = ["gemswatch.testing.correctness"]
