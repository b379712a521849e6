# The benchmark plugin adds --override, --override-config, --list-overrides,
# the benchmark options (--level, --list-cases, --case-id, --preflight-only,
# --profile-only, --reference-only, ...) and the `bench` fixture.
pytest_plugins = ["gemswatch.testing.benchmark.plugin"]
