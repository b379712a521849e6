"""`gemswatch new OP` for every operator of config.yaml: the candidate holds
OP's function and what it uses, not its family's other operators, and it
computes what torch does (one small case each, so the whole
check stays a few seconds under the Triton interpreter; the full
correctness selections of the scaffolded files are run by hand, see
docs/watch.md)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from gemswatch.watch.config import load_config
from gemswatch.watch.scaffold import find_kernel_source, make_candidate_source

ROOT = Path(__file__).resolve().parents[2]
OPERATORS = sorted(load_config(ROOT / "config.yaml").operators)
F = torch.nn.functional
# torch's own operator where it is not torch.<op> (the gems kernels mirror these).
REFERENCE = {"gelu": F.gelu, "silu": F.silu, "rms_norm": F.rms_norm, "layer_norm": F.layer_norm,
             "addmm_": lambda c, a, b: c.addmm_(a, b)}


def _inputs(op: str) -> tuple[tuple, dict]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 9, generator=g)
    y = torch.randn(2, 9, generator=g)
    w = torch.randn(9, generator=g)
    a, b, c = torch.randn(3, 4, generator=g), torch.randn(4, 2, generator=g), torch.randn(3, 2, generator=g)
    return {
        "add": ((x, y), {}), "mul": ((x, y), {}), "gelu": ((x,), {}), "silu": ((x,), {}),
        "sum": ((x, 1), {}), "mean": ((x, 1), {}), "amax": ((x, 1), {}),
        "softmax": ((x, -1), {}), "log_softmax": ((x, -1), {}),
        "rms_norm": ((x, [9], w), {}), "layer_norm": ((x, [9], w, w), {}),
        "mm": ((a, b), {}), "addmm": ((c, a, b), {}), "addmm_": ((c.clone(), a, b), {}),
    }[op]


def _load(path: Path, name: str, monkeypatch):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # as the override loader does (dataclasses look it up)
    spec.loader.exec_module(module)
    return module


def _public_functions(source: str) -> set[str]:
    return {n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}


@pytest.mark.parametrize("op", OPERATORS)
def test_a_new_candidate_holds_its_operator_only_and_computes_what_torch_does(tmp_path: Path, op: str, monkeypatch):
    family, package = find_kernel_source(op)
    func = f"my_{op}"
    text = make_candidate_source(family.read_text(encoding="utf-8"), package, op, func, f"{package}.{family.stem}")
    tree = ast.parse(text)
    assert _public_functions(text) == {func}, "another operator of the family was copied"
    assert ast.get_docstring(tree).startswith(f"``{func}``: a candidate for ``{op}``")
    exports = [n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "__all__"]
    assert len(exports) == 1 and ast.literal_eval(exports[0].value) == [func]
    path = tmp_path / f"{op}_v2.py"
    path.write_text(text, encoding="utf-8")
    candidate = getattr(_load(path, f"gemswatch_new_{op}", monkeypatch), func)
    args, kwargs = _inputs(op)
    reference = REFERENCE[op] if op in REFERENCE else getattr(torch, op)
    expected = reference(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args], **kwargs)
    torch.testing.assert_close(candidate(*args, **kwargs), expected)
