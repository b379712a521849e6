# The benchmark plugin adds --override, --override-config, --list-overrides,
# the benchmark options (--gemswatch-level, --list-cases, --case-id,
# --preflight-only, --profile-only, --reference-only, ...) and the `bench`
# fixture; upstream_spellings lets this checkout take upstream's --level,
# --record, --warmup, --iter, --dtypes and --query as well.
pytest_plugins = ["gemswatch.testing.benchmark.plugin", "gemswatch.testing.upstream_spellings"]
