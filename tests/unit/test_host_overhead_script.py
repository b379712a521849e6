"""scripts/host_overhead.py: its tiny cases and its stand-in for Triton's launches."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

from gemswatch import gems

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "host_overhead.py"


def _script():
    spec = importlib.util.spec_from_file_location("host_overhead", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


host_overhead = _script()


def test_tiny_cases_keep_the_dims_and_cap_the_sizes():
    tiny = host_overhead.tiny_shape({"x": [8, 2048, 4096], "other": [4096]})
    assert len(tiny["x"]) == 3 and tiny["other"] == [256]
    assert max(tiny["x"]) <= host_overhead.TINY_DIM and torch.Size(tiny["x"]).numel() <= host_overhead.TINY_NUMEL
    assert host_overhead.tiny_shape({"M": 4096, "N": 16, "K": 1024}) == {"M": 256, "N": 16, "K": 256}


def test_launches_are_counted_and_skipped_while_stubbed():
    x = torch.ones(4, 5, device=gems.device)
    counter = host_overhead.LaunchCounter()
    with counter.active():
        gems.softmax(x, dim=-1)
        gems.sum(x)  # one pass at this size
    assert counter.launches == 2
    # Outside the block the kernels run again.
    assert torch.allclose(gems.softmax(x, dim=-1), torch.full((4, 5), 0.2, device=gems.device))


def test_every_benchmarked_op_is_found():
    ops = {b.op for b in host_overhead.load_benchmarks(None)}
    assert {"add", "mm", "addmm", "addmm_", "softmax", "layer_norm", "sum"} <= ops


def test_recorded_launches_compute_the_call_when_issued_again():
    x = torch.zeros(4, 5, device=gems.device)
    recorder = host_overhead.LaunchRecorder()
    with recorder.active():
        y = gems.softmax(x, dim=-1)  # allocated, not computed
    assert recorder.launches == 1
    y.fill_(-1.0)
    recorder.replay()
    assert torch.allclose(y, torch.full((4, 5), 0.2, device=gems.device))
