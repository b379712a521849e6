"""Benchmark command-line options and their validation.

The option names, choices and defaults are FlagGems' benchmark options, so a
command line written for an upstream checkout works here. The ones
upstream's conftests define themselves (``SHARED``: --level, --warmup,
--iter, --dtypes, --query, and --record) are registered as ``--gemswatch-X``,
so this plugin can load into an upstream session without a clash; this
checkout's own conftests take the upstream spelling too
(:mod:`gemswatch.testing.upstream_spellings`). Validation follows
upstream's order; every conflict is a ``pytest.UsageError`` (exit 4) with a
one-line message.

Imports pytest and :mod:`.cases`; never torch, the runner, the plugin or
``gemswatch.watch``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import pytest

from .cases import LEVELS

__all__ = ["BenchOptions", "DTYPE_CHOICES", "DEFAULT_OUTPUTS", "SHARED", "add_options", "read_options"]

DTYPE_CHOICES = ("float16", "float32", "bfloat16", "int16", "int32", "bool", "complex64")
DEFAULT_WARMUP_MS = 1000  # on a GPU: clocks, caches and the allocator settle
# Under the CPU interpreter nothing settles after the first calls, and a
# second of warm-up for each of the candidate and its baselines was most of
# a CPU benchmark stage.
INTERPRETER_WARMUP_MS = 200
DEFAULT_ITER_MS = 100

# Report written when --output is not given, per mode (relative to the
# directory pytest was invoked from).
DEFAULT_OUTPUTS = {
    "list": "benchmark_result.json",
    "preflight": "preflight_result.json",
    "reference": "reference_result.json",
    "timing": "benchmark_result.json",
    "timing-log": "benchmark_result.log",
}


def _milliseconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of milliseconds, got {text!r}") from None


# Upstream spelling -> its addoption arguments; registered as --gemswatch-<name>.
SHARED: dict[str, dict] = {
    "--level": dict(dest="gemswatch_level", default=None, choices=list(LEVELS),
                    help="case set to run (default: comprehensive; core under --reference-only)"),
    "--warmup": dict(dest="gemswatch_warmup", default=None, type=_milliseconds, metavar="MS",
                     help=f"warmup time per timed function in ms (default {DEFAULT_WARMUP_MS} on a GPU, "
                          f"{INTERPRETER_WARMUP_MS} under the CPU interpreter)"),
    "--iter": dict(dest="gemswatch_iter", default=DEFAULT_ITER_MS, type=_milliseconds, metavar="MS",
                   help=f"measuring time per timed function in ms (default {DEFAULT_ITER_MS})"),
    "--dtypes": dict(dest="gemswatch_dtypes", action="append", default=None, choices=list(DTYPE_CHOICES),
                     help="benchmark only these dtypes (repeatable)"),
    "--query": dict(dest="gemswatch_query", action="store_true", default=False,
                    help="print the planned shapes of each benchmark and run nothing"),
}


def add_options(parser: pytest.Parser) -> None:
    """Register the benchmark options in the "benchmark" group (--gemswatch-record
    and --output come from the shared report options)."""
    group = parser.getgroup("benchmark", "gems benchmark options")
    add = group.addoption
    add("--reference-only", action="store_true", default=False,
        help="run only the torch baseline of each case and write flaggems.reference/v2")
    for name, kwargs in SHARED.items():
        add("--gemswatch-" + name[2:], **kwargs)
    add("--list-cases", action="store_true", default=False,
        help="write the tensor-free case list (flaggems.benchmark-case-list/v2) to --output and run nothing")
    add("--case-id", action="append", default=None, metavar="ID",
        help="run only this case (an id from --list-cases on this checkout); repeatable")
    add("--preflight-only", action="store_true", default=False,
        help="call the candidate once per selected case, then synchronise; write flaggems.preflight/v1")
    add("--profile-only", action="store_true", default=False,
        help="replay exactly one --case-id, candidate only, inside the pytest_flaggems_profile_scope hook")
    add("--profile-warmup", default=10, type=int, metavar="N",
        help="candidate calls before the profile scope (default 10)")
    add("--profile-iterations", default=1, type=int, metavar="N",
        help="candidate calls inside the profile scope (default 1)")
    add("--torch-compile", default="auto", choices=["auto", "on", "off"],
        help="time torch.compile of each case's baseline too: auto (on CUDA only; seconds per case on the CPU), "
        "on or off (default auto)")
    add("--parallel", default=0, type=int, metavar="N",
        help="accepted for compatibility with upstream command lines; gems benchmarks do not shard")


@dataclass(frozen=True)
class BenchOptions:
    """The validated benchmark options of a session."""

    mode: str  # "reference", "preflight", "profile", "list", "query" or "timing"
    level: str
    warmup_ms: float
    iter_ms: float
    dtypes: tuple[str, ...] | None
    record: str
    output: Path | None  # the report this session writes, None for none
    output_defaulted: bool
    case_ids: tuple[str, ...] | None
    profile_warmup: int
    profile_iterations: int
    parallel: int
    torch_compile: str = "auto"  # the torch.compile baseline: auto, on or off

    @property
    def calls_candidate(self) -> bool:
        """Whether this mode runs the candidate (and so must call every override)."""
        return self.mode in ("timing", "preflight", "profile")


def _dashed(name: str) -> str:
    return "--" + name.replace("_", "-")


def _check_conflicts(o) -> None:
    # The order is upstream's; the first rule that matches wins.
    if o.reference_only:
        others = ("override", "override_config", "profile_only", "preflight_only", "list_cases", "query",
                  "parallel", "numprocesses")
        given = [_dashed(n) for n in others if getattr(o, n, None)]
        if given:
            raise pytest.UsageError(f"--reference-only cannot be combined with {', '.join(given)}")
    if o.preflight_only:
        given = [_dashed(n) for n in ("profile_only", "list_cases", "query") if getattr(o, n)]
        if given:
            raise pytest.UsageError(f"--preflight-only cannot be combined with {', '.join(given)}")
        if o.parallel:
            raise pytest.UsageError(f"--preflight-only does not support --parallel {o.parallel}; drop --parallel")
    if o.list_cases and o.case_id:
        raise pytest.UsageError("--list-cases lists every case; it cannot be combined with --case-id")
    if o.query and (o.list_cases or o.case_id):
        given = [n for n, v in (("--list-cases", o.list_cases), ("--case-id", o.case_id)) if v]
        raise pytest.UsageError(f"--query cannot be combined with {', '.join(given)}")
    if o.case_id:
        seen, dups = set(), []
        for cid in o.case_id:
            if cid in seen and cid not in dups:
                dups.append(cid)
            seen.add(cid)
        if dups:
            raise pytest.UsageError(f"--case-id given more than once: {', '.join(dups)}")
    if o.profile_only and len(o.case_id or ()) != 1:
        raise pytest.UsageError(
            f"--profile-only needs exactly one --case-id (got {len(o.case_id or ())}); take one from --list-cases"
        )
    if o.profile_only and o.list_cases:
        raise pytest.UsageError("--profile-only cannot be combined with --list-cases")
    if o.profile_warmup < 0 or o.profile_iterations < 1:
        raise pytest.UsageError(
            f"--profile-warmup must be >= 0 and --profile-iterations >= 1 "
            f"(got {o.profile_warmup} and {o.profile_iterations})"
        )
    # Beyond upstream: values that would silently time nothing.
    if (o.warmup is not None and o.warmup < 0) or o.iter <= 0:
        warmup = "the default" if o.warmup is None else f"{o.warmup:g}"
        raise pytest.UsageError(f"--warmup must be >= 0 and --iter > 0 ms (got {warmup} and {o.iter:g})")
    if o.parallel < 0:
        raise pytest.UsageError(f"--parallel must be >= 0 (got {o.parallel})")


def _mode(o) -> str:
    for flag, mode in (("reference_only", "reference"), ("preflight_only", "preflight"), ("profile_only", "profile"),
                       ("list_cases", "list"), ("query", "query")):
        if getattr(o, flag):
            return mode
    return "timing"


def _default_warmup_ms() -> float:
    from ... import gems

    return INTERPRETER_WARMUP_MS if gems.interpreted else DEFAULT_WARMUP_MS


def read_options(config: pytest.Config) -> BenchOptions:
    """Validate the benchmark options of ``config``.

    Raises:
        pytest.UsageError: on conflicting or out-of-range options, or an
            --output whose folder does not exist.
    """
    o = argparse.Namespace(**vars(config.option))
    for name, kwargs in {**SHARED, "--record": {"dest": "gemswatch_record"}}.items():
        setattr(o, name[2:], getattr(o, kwargs["dest"], None))  # the checks below speak upstream's names
    _check_conflicts(o)
    mode = _mode(o)
    level = o.level or ("core" if mode == "reference" else "comprehensive")
    record = o.record or "none"
    key = None
    if mode in ("list", "preflight", "reference"):
        key = mode
    elif mode == "timing" and record == "json":
        key = "timing"
    elif mode == "timing" and record == "log":
        key = "timing-log"
    output = None
    defaulted = False
    if key is not None:
        defaulted = not o.output
        output = Path(o.output or DEFAULT_OUTPUTS[key])
        if not output.is_absolute():
            output = Path(config.invocation_params.dir) / output
        if output.is_dir():
            raise pytest.UsageError(f"--output {o.output} is a folder; give a file path for the report")
        if not output.parent.is_dir():
            raise pytest.UsageError(f"--output {o.output}: folder {output.parent} does not exist; create it first")
    return BenchOptions(
        mode=mode,
        level=level,
        warmup_ms=float(o.warmup if o.warmup is not None else _default_warmup_ms()),
        iter_ms=float(o.iter),
        dtypes=tuple(dict.fromkeys(o.dtypes)) if o.dtypes else None,
        record=record,
        output=output,
        output_defaulted=defaulted,
        case_ids=tuple(o.case_id) if o.case_id else None,
        profile_warmup=o.profile_warmup,
        profile_iterations=o.profile_iterations,
        parallel=o.parallel,
        torch_compile=getattr(o, "torch_compile", "auto"),
    )
