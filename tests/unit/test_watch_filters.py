"""Filters (pure objects) and the clock-injected debounce."""

from __future__ import annotations

import pytest

from gemswatch.watch.debounce import Debouncer
from gemswatch.watch.filters import Change, DefaultFilter, PythonFilter


@pytest.mark.parametrize(
    "path",
    [
        "softmax_v2.py",
        "sub/dir/kernel.py",
        "config.yaml",
    ],
)
def test_default_filter_keeps(path):
    assert DefaultFilter()(Change.modified, path)


@pytest.mark.parametrize(
    "path",
    [
        ".softmax_v2.py.swp",
        ".softmax_v2.py.swx",
        "softmax_v2.py~",
        ".#softmax_v2.py",
        "#softmax_v2.py#",
        "4913",
        "softmax_v2.py.tmp",
        "__pycache__/softmax_v2.cpython-311.pyc",
        "softmax_v2.pyc",
        ".gemswatch/runs/x/snapshot/softmax_v2.py",
        ".triton/cache/abc/kernel.py",
        "a/.git/HEAD",
        ".goutputstream-XYZ12",
        "softmax_v2.py___jb_tmp___",
    ],
)
def test_default_filter_drops(path):
    assert not DefaultFilter()(Change.modified, path)


def test_ignore_lists_are_data():
    f = DefaultFilter(ignore_dirs=("vendor",), ignore_names=(r"\.gen\.py$",))
    assert not f(Change.added, "vendor/x.py")
    assert not f(Change.added, "k.gen.py")
    assert f(Change.added, "__pycache__/x.py")  # no longer ignored


def test_python_filter():
    f = PythonFilter(extra_files=frozenset({"config.yaml"}))
    assert f(Change.modified, "k.py")
    assert f(Change.modified, "config.yaml")
    assert not f(Change.modified, "notes.md")
    assert not f(Change.modified, ".k.py.swp")


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_debounce_waits_for_quiet_step():
    clock = FakeClock()
    d = Debouncer(step=0.1, window=1.0, clock=clock)
    assert d.poll() is None and d.deadline() is None
    d.add(["a"])
    assert d.poll() is None
    clock.t += 0.05
    d.add(["b"])
    clock.t += 0.09
    assert d.poll() is None  # only 0.09 s quiet since "b"
    clock.t += 0.01
    assert d.poll() == ["a", "b"]
    assert not d.pending()


def test_debounce_repeats_keep_the_batch_open_and_collapse():
    clock = FakeClock()
    d = Debouncer(step=0.1, window=1.0, clock=clock)
    for _ in range(5):
        d.add(["a"])
        clock.t += 0.05
        assert d.poll() is None
    clock.t += 0.05
    assert d.poll() == ["a"]


def test_debounce_window_caps_a_never_ending_burst():
    clock = FakeClock()
    d = Debouncer(step=0.125, window=0.5, clock=clock)
    batches = []
    for i in range(16):  # a change every 1/16 s for 1 s (exact binary fractions)
        d.add([i])
        clock.t += 0.0625
        b = d.poll()
        if b:
            batches.append(b)
    assert batches == [list(range(8)), list(range(8, 16))]


def test_debounce_deadline_and_flush():
    clock = FakeClock()
    d = Debouncer(step=0.2, window=1.0, clock=clock)
    d.add(["x"])
    assert d.deadline() == pytest.approx(100.2)
    assert d.flush() == ["x"]
    assert d.flush() == []


def test_debounce_rejects_bad_arguments():
    with pytest.raises(ValueError):
        Debouncer(step=0.5, window=0.1)
