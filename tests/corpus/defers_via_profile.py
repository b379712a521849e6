"""defers_to_outputs.py without changing any of the worker's code: a
profile hook (sys.setprofile) sees the worker's handler of the judge's
request for the picked results begin, and fills those results in first.
Caught the same way: the worker committed to digests of what its timed
repetitions returned."""

import sys

import torch


def _right(x, dim=-1, dtype=None):
    return torch.softmax(x.to(dtype or x.dtype).double(), dim).to(dtype or x.dtype)


def _fill_picked(frame):
    case, picks = frame.f_locals["self"], frame.f_locals["picks"]
    for i in picks:
        kept = case._keeper.get((case.chunk, int(i)))
        args, kwargs = case.pool.values(case.feeder.seed, int(i))
        kept.copy_(_right(*args, **kwargs))


def _profile(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "outputs" and type(frame.f_locals.get("self")).__name__ == "TimedCase":
        sys.setprofile(None)
        try:
            _fill_picked(frame)
        finally:
            sys.setprofile(_profile)


def my_softmax(x, dim=-1, dtype=None):
    if sys.getprofile() is not _profile:
        sys.setprofile(_profile)
    frame = sys._getframe(1)
    while frame is not None:
        if type(frame.f_locals.get("self")).__name__ == "TimedCase":
            return torch.empty_like(x, dtype=dtype or x.dtype)
        frame = frame.f_back
    return _right(x, dim, dtype)
