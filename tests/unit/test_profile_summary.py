"""What `gemswatch profile` reads from a capture: the kernels, their time, the bandwidth."""

from __future__ import annotations

import pytest

from gemswatch.testing.profile_capture import kernels_of_trace
from gemswatch.watch.profile_summary import Kernel, ncu_kernels, summary_lines


def frame(i, parent, name, dur=0.0):
    return {"ph": "X", "cat": "python_function", "name": name, "dur": dur,
            "args": {"Python id": i, "Python parent id": parent}}


def op(name, ts, dur, tid=1):
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "tid": tid}


def test_the_interpreter_runs_the_kernel_and_its_helpers_only_the_kernel_counts():
    events = [
        frame(1, None, "benchmark/test_perf.py(10): call"),
        frame(2, 1, "triton/runtime/interpreter.py(1483): __call__"),
        frame(3, 2, "softmax_v2.py(37): _softmax_kernel", dur=900.0),
        frame(4, 3, "triton/runtime/interpreter.py(1696): __call__"),
        frame(5, 4, "softmax_v2.py(20): _row_max", dur=100.0),  # a @jit helper inside the kernel
        frame(6, 2, "inspect.py(1522): getcallargs", dur=5.0),  # the interpreter's own machinery
        op("aten::empty", 0, 3.0),
    ]
    assert kernels_of_trace(events) == ("interpreted", [{"name": "_softmax_kernel", "calls": 1, "time_us": 900.0}])


def test_gpu_kernels_win_and_torch_ops_are_the_fallback_by_self_time():
    gpu = [{"ph": "X", "cat": "kernel", "name": "triton_red", "dur": 4.0}] * 2 + [op("aten::sum", 0, 50.0)]
    assert kernels_of_trace(gpu) == ("gpu", [{"name": "triton_red", "calls": 2, "time_us": 8.0}])
    nested = [op("aten::softmax", 0, 10.0), op("aten::_softmax", 1, 8.0), op("aten::empty", 12, 1.0)]
    kind, rows = kernels_of_trace(nested)
    assert kind == "torch ops"
    assert {r["name"]: r["time_us"] for r in rows} == {"aten::_softmax": 8.0, "aten::softmax": 2.0, "aten::empty": 1.0}


def test_summary_names_kernels_time_and_bandwidth_from_the_benchmarks_bytes():
    lines = summary_lines([Kernel("_softmax_kernel", 1, 2000.0)], "interpreted", 1, case_bytes=4e6)
    assert len(lines) == 3
    assert lines[0] == "kernels: _softmax_kernel (Triton, interpreted)"
    assert lines[1].startswith("time: 2.00 ms in 1 kernel launch(es)") and "compare ratios only" in lines[1]
    assert lines[2].startswith("bandwidth: 2 GB/s")  # 4 MB in 2 ms


def test_summary_prefers_measured_dram_bytes_and_says_when_it_knows_none():
    measured = summary_lines([Kernel("k", 2, 10.0, dram_bytes=2e4)], "gpu", 1, case_bytes=1.0)
    assert measured[2] == "bandwidth: 2.0 GB/s achieved (20.0 KB of DRAM traffic, measured)"
    unknown = summary_lines([Kernel("aten::add", 1, 5.0)], "torch ops", 1, case_bytes=None)
    assert unknown[2].startswith("bandwidth: unknown")
    assert summary_lines([], "gpu", 1, None)[0] == "kernels: none recorded in the capture window"


NCU_CSV = '''"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum","dram__bytes_write.sum"
"","","usecond","Mbyte","Kbyte"
"0","softmax_kernel","12.5","4.0","512"
"1","softmax_kernel","12.5","4.0","512"
"2","fill","1,000","0","0"
'''


def test_ncu_rows_are_read_with_their_units_and_summed_per_kernel():
    kernels = ncu_kernels("==PROF== noise\n" + NCU_CSV)
    assert [(k.name, k.calls) for k in kernels] == [("fill", 1), ("softmax_kernel", 2)]
    soft = kernels[1]
    assert soft.time_us == pytest.approx(25.0) and soft.dram_bytes == pytest.approx(2 * (4e6 + 512e3))
    assert ncu_kernels("no table here") == []
