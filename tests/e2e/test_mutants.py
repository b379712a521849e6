"""Every mutant in tests/mutants/ is wrong, and the correctness suite says so.

A mutant is a candidate file with one realistic bug in a path only some
inputs reach (its docstring says which). Two checks each:

- on its ``witness()`` input it is wrong against the float64 reference of
  tests/mutants/_references.py, where the library is right (so the bug is
  real and the witness reaches it);
- its operator's correctness selection, run as a stage runs it, gives the
  verdict ``failed`` (killed), not an error or a crash; the run stops at the
  first failing case.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from gemswatch import gems
from gemswatch.testing.accuracy import assert_close

ROOT = Path(__file__).resolve().parents[2]
MUTANTS = ROOT / "tests" / "mutants"
sys.path.insert(0, str(MUTANTS))
from _references import REFERENCES  # noqa: E402

# Operators whose tests file and marker differ from the operator's name.
TESTS = {
    "add": "tests/test_pointwise.py", "mul": "tests/test_pointwise.py", "gelu": "tests/test_pointwise.py",
    "silu": "tests/test_pointwise.py", "sum": "tests/test_reduction.py", "mean": "tests/test_reduction.py",
    "amax": "tests/test_reduction.py", "softmax": "tests/test_softmax.py", "log_softmax": "tests/test_log_softmax.py",
    "rms_norm": "tests/test_norm.py", "layer_norm": "tests/test_norm.py", "mm": "tests/test_mm.py",
    "addmm": "tests/test_mm.py", "addmm_": "tests/test_mm.py",
}
FILES = sorted(p for p in MUTANTS.glob("*__*.py"))


def _operator(path: Path) -> str:
    # <op>__<slug>; the longest name first ("addmm___x" is addmm_'s).
    for op in sorted(TESTS, key=len, reverse=True):
        if path.stem.startswith(op + "__"):
            return op
    raise AssertionError(f"{path.name}: not named <operator>__<slug>.py for a known operator")


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"mutant_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _on_device(value):
    if isinstance(value, torch.Tensor):
        return value.to(gems.device)
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return type(value)(_on_device(v) for v in value)
    return value


def _copy(value):
    # Same sizes and strides (a padded or stepped view stays one), fresh
    # memory: an in-place operator must not see another's result.
    if not isinstance(value, torch.Tensor):
        return value
    value = _on_device(value)
    copy = torch.empty_strided(value.size(), value.stride(), dtype=value.dtype, device=value.device)
    return copy.copy_(value) if 0 not in value.stride() else value.clone().as_strided(value.size(), value.stride())


def _copies(args, kwargs):
    return [_copy(a) for a in args], {k: _copy(v) for k, v in kwargs.items()}


def _judge(out, want, args) -> None:
    # The most generous length a reduction of this input could have.
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    n = first.numel() if first is not None else 1
    assert_close(out, want.to(out.dtype).double() if not out.dtype.is_floating_point else want, out.dtype, reduce_len=max(1, n), equal_nan=True)


def test_every_operator_has_mutants():
    ops = {_operator(p) for p in FILES}
    assert set(REFERENCES) <= set(TESTS)
    assert ops <= set(REFERENCES), f"mutants of operators without a reference: {sorted(ops - set(REFERENCES))}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_the_mutant_is_wrong_on_its_witness(path):
    op = _operator(path)
    module = _load(path)
    assert module.__doc__ and len(module.__doc__.strip()) > 40, "the docstring says the bug and which inputs reach it"
    args, kwargs = module.witness()
    want = REFERENCES[op](*_copies(args, kwargs)[0], **_copies(args, kwargs)[1])
    library_args, library_kwargs = _copies(args, kwargs)
    _judge(getattr(gems, op)(*library_args, **library_kwargs), want, library_args)
    mutant_args, mutant_kwargs = _copies(args, kwargs)
    with pytest.raises((AssertionError, RuntimeError, ValueError)):
        _judge(getattr(module, op)(*mutant_args, **mutant_kwargs), want, mutant_args)


def _project(root: Path) -> Path:
    """A project with the repository's accuracy suites and every mutant
    mapped as a candidate of its operator; each selection stops at its first
    failing case (-x), as a stage that only needs the verdict may."""
    for path in [ROOT / "pyproject.toml", *ROOT.glob("tests/*.py")]:
        target = root / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    (root / "mutants").mkdir()
    for path in FILES:
        shutil.copyfile(path, root / "mutants" / path.name)
    config = {
        "watch": "mutants",
        "benchmark": "never",
        "timeouts": {"correctness": 300},
        "candidates": {p.name: {_operator(p): _operator(p)} for p in FILES},
        "operators": {op: {"tests": f"{tests} -x", "marker": op} for op, tests in TESTS.items()},
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> dict[str, dict]:
    """mutant file name -> its correctness stage_finished event, from one
    `gemswatch run` over all of them (warm stages, as many at once as CPUs)."""
    project = _project(tmp_path_factory.mktemp("mutants"))
    result = subprocess.run(
        [sys.executable, "-m", "gemswatch.watch", "run", "--json"], cwd=project, capture_output=True, text=True,
        timeout=1200, env={**os.environ, "GEMSWATCH_DEVICE": "cpu"},
    )
    found = {}
    for line in result.stdout.splitlines():
        event = json.loads(line) if line.strip() else {}
        if event.get("event") == "stage_finished" and event.get("stage") == "correctness":
            found[Path(event["candidate"]).name] = event
    assert found, result.stderr[-3000:]
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_the_suite_kills_the_mutant(path, verdicts):
    event = verdicts.get(path.name)
    assert event is not None, f"{path.name}: no correctness verdict"
    # Killed: a failing case, not an error of the stage or a crash.
    assert event["status"] == "failed", (
        f"{path.name} survived: {event['status']} ({event.get('message')}), seed {event.get('seed')}"
    )
    assert event.get("first_failure"), event
