"""A capture provider for ``--profile-only``: the torch profiler, or ncu's window.

Loaded with ``-p gemswatch.testing.profile_capture --profile-report-dir DIR``
next to the benchmark plugin; its :class:`CaptureProvider` implements
``pytest_flaggems_profile_scope`` and writes into DIR:

- ``--profile-tool torch`` (the default): the captured calls run under
  ``torch.profiler`` (CUDA activity where there is a GPU, else the CPU's,
  with Python frames so Triton's interpreter shows which kernel it ran);
  ``trace.json`` is the Chrome trace and ``profile.json``
  (``gemswatch.profile/v1``) lists the kernels, their calls and time.
- ``--profile-tool ncu``: the process runs under
  ``ncu --profile-from-start off``; the scope opens and closes ncu's
  window (``cudaProfilerStart``/``Stop``) and ``profile.json`` records that
  it did. The kernels are read from ncu's own report afterwards.

``profile.json`` is written when the scope exits, also when the candidate
raised (with the error), so a run that produced no file never entered the
scope. Imports pytest, torch (when capturing) and the harness's atomic
writer; never ``gemswatch.watch``.
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from ._atomic import write_json_atomic

__all__ = ["PROFILE_SCHEMA", "CaptureProvider", "kernels_of_trace"]

PROFILE_SCHEMA = "gemswatch.profile/v1"
KERNELS_KEPT = 20  # rows of profile.json's kernel list

_INTERPRETER = "triton/runtime/interpreter.py"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("profile capture", "gemswatch's --profile-only capture provider")
    group.addoption("--profile-report-dir", default=None, metavar="DIR",
                    help="folder for profile.json and the profiler's report (required with this plugin)")
    group.addoption("--profile-tool", default="torch", choices=("torch", "ncu"),
                    help="torch: the torch profiler; ncu: open ncu's window (run the process under ncu)")


def pytest_configure(config: pytest.Config) -> None:
    folder = config.getoption("profile_report_dir")
    if not folder:
        raise pytest.UsageError("gemswatch.testing.profile_capture needs --profile-report-dir DIR: "
                                "the folder its report goes to")
    if not Path(folder).is_dir():
        raise pytest.UsageError(f"--profile-report-dir {folder}: no such folder; create it first")
    config.pluginmanager.register(CaptureProvider(Path(folder), config.getoption("profile_tool")),
                                  "gemswatch-profile-capture")


class CaptureProvider:
    """The ``pytest_flaggems_profile_scope`` of one session: ``tool`` writes into ``folder``."""

    def __init__(self, folder: Path, tool: str):
        self.folder = folder
        self.tool = tool

    @pytest.hookimpl(optionalhook=True)
    def pytest_flaggems_profile_scope(self, backend: str, case_id: str):
        window = _ncu_window if self.tool == "ncu" else _torch_window
        return window(self.folder, backend, case_id)


def _report(out: Path, fields: dict[str, Any]) -> None:
    write_json_atomic(out / "profile.json", {"schema_version": PROFILE_SCHEMA, **fields})


@contextmanager
def _ncu_window(out: Path, backend: str, case_id: str) -> Iterator[None]:
    import torch

    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    start = time.perf_counter()
    error = None
    try:
        yield
    except BaseException as e:
        error = f"{type(e).__name__}: {e}"
        raise
    finally:
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        _report(out, {"tool": "ncu", "backend": backend, "case_id": case_id, "device": "cuda",
                      "window_ms": (time.perf_counter() - start) * 1e3, "error": error, "kernels": []})


@contextmanager
def _torch_window(out: Path, backend: str, case_id: str) -> Iterator[None]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    # Python frames only without a GPU: they name the kernel Triton's
    # interpreter runs, and would only slow a GPU capture down.
    prof = profile(activities=activities, with_stack=not cuda)
    error = None
    start = time.perf_counter()
    try:
        with prof:
            yield
    except BaseException as e:
        error = f"{type(e).__name__}: {e}"
        raise
    finally:
        window_ms = (time.perf_counter() - start) * 1e3
        trace = out / "trace.json"
        prof.export_chrome_trace(str(trace))
        kind, kernels = kernels_of_trace(_trace_events(trace))
        _report(out, {"tool": "torch", "backend": backend, "case_id": case_id, "device": "cuda" if cuda else "cpu",
                      "window_ms": window_ms, "error": error, "trace": trace.name, "kind": kind,
                      "kernels": kernels[:KERNELS_KEPT]})


def _trace_events(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    events = data.get("traceEvents") if isinstance(data, dict) else None
    return [e for e in events or [] if isinstance(e, dict) and e.get("ph") == "X"]


def _rows(totals: dict[str, list[float]]) -> list[dict[str, Any]]:
    rows = [{"name": n, "calls": int(v[0]), "time_us": v[1]} for n, v in totals.items()]
    return sorted(rows, key=lambda r: -r["time_us"])


def kernels_of_trace(events: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(kind, kernels, most time first) of a Chrome trace's complete events:
    GPU kernels where there are any (``gpu``); else the Triton kernels the
    interpreter ran (``interpreted``: a function the interpreter called that
    no other such function called); else the torch operators by their self
    time (``torch ops``). Each kernel: name, calls, time_us."""
    totals: dict[str, list[float]] = {}

    def add(name: str, us: float) -> None:
        t = totals.setdefault(name, [0, 0.0])
        t[0] += 1
        t[1] += us

    for e in events:
        if e.get("cat") == "kernel":
            add(str(e.get("name")), float(e.get("dur") or 0.0))
    if totals:
        return "gpu", _rows(totals)
    frames = {e["args"].get("Python id"): e for e in events
              if e.get("cat") == "python_function" and isinstance(e.get("args"), dict)}
    # The interpreter runs a kernel (and each @jit helper) by calling its
    # Python function from one of its own __call__ frames.
    called = {i for i, e in frames.items()
              if _own_code(str(e.get("name", ""))) and _is_interpreter_call(str(_parent(frames, e, "name")))}
    for i in called:
        e, up, nested = frames[i], frames[i], False
        while (up := frames.get(up["args"].get("Python parent id"))) is not None:
            if up["args"].get("Python id") in called:
                nested = True
                break
        if not nested:
            add(_function_name(str(e.get("name"))), float(e.get("dur") or 0.0))
    if totals:
        return "interpreted", _rows(totals)
    for name, us in _self_times([e for e in events if e.get("cat") == "cpu_op"]):
        add(name, us)
    return "torch ops", _rows(totals)


def _parent(frames: dict[Any, dict[str, Any]], e: dict[str, Any], key: str) -> Any:
    up = frames.get(e["args"].get("Python parent id"))
    return up.get(key) if up else None


def _is_interpreter_call(frame: str) -> bool:
    return _INTERPRETER in frame and frame.endswith("): __call__")


# Frames of these are never a kernel: the interpreter's own machinery.
_LIBRARIES = frozenset({"triton", "numpy", "torch"}) | frozenset(sys.stdlib_module_names)


def _own_code(frame: str) -> bool:
    """Whether a profiler frame (``path/to/file.py(12): name``) is user code:
    not the standard library, Triton, numpy or torch, nor generated code."""
    if frame.startswith("<"):
        return False
    path = frame.split("(", 1)[0]
    if path.startswith("/"):
        return not any(f"/{lib}/" in path for lib in ("triton", "numpy", "torch"))
    top = path.split("/", 1)[0].removesuffix(".py")
    return top not in _LIBRARIES


def _function_name(frame: str) -> str:
    """``_softmax_kernel`` of a frame named ``/path/softmax.py(55): _softmax_kernel``."""
    return frame.rsplit("): ", 1)[-1]


def _self_times(ops: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """(name, self time in us) of nested operator events of one trace: an
    event's time minus its direct children's, per thread."""
    out: list[tuple[str, float]] = []
    by_thread: dict[Any, list[dict[str, Any]]] = {}
    for e in ops:
        by_thread.setdefault(e.get("tid"), []).append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (float(e.get("ts") or 0.0), -float(e.get("dur") or 0.0)))
        stack: list[list[Any]] = []  # [end, name, self time]
        for e in evs:
            ts, dur = float(e.get("ts") or 0.0), float(e.get("dur") or 0.0)
            while stack and stack[-1][0] <= ts:
                end, name, own = stack.pop()
                out.append((name, own))
            if stack:
                stack[-1][2] -= dur
            stack.append([ts + dur, str(e.get("name")), dur])
        out.extend((name, own) for _, name, own in stack)
    return out
