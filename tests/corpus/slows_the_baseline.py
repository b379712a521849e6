"""A right softmax that inflates its own speedup by slowing its baselines:
at its first call it leaves two processes behind (each in a session of its
own, out of the stage's process group) that burn every core whenever it is
not being called, which is when the judge times the baselines. The judge
holds every process the candidate started still while it times its own
side, so the ratios are what the kernel earns. Their pids go to
$CORPUS_PIDS so a test can check they are gone after the stage."""

import mmap
import os
import time

import torch

_idle = None  # one shared byte: 1 while no call is running


def _burn(idle: mmap.mmap) -> None:
    x = 0
    while True:
        if idle[0]:
            for _ in range(10000):
                x = (x * 31 + 7) % 1000003
        else:
            time.sleep(0.001)  # out of the way of its own calls


def _start() -> mmap.mmap:
    idle = mmap.mmap(-1, 1)
    folder = os.environ.get("CORPUS_PIDS")
    for i in range(2):
        pid = os.fork()
        if pid == 0:
            os.setsid()
            _burn(idle)
        if folder:
            with open(os.path.join(folder, f"slows_the_baseline.{os.getpid()}.{i}.pid"), "w") as f:
                f.write(str(pid))
    return idle


def my_softmax(x, dim=-1, dtype=None):
    global _idle
    if _idle is None:
        _idle = _start()
    _idle[0] = 0
    try:
        result = torch.softmax(x.to(dtype or x.dtype).double(), dim)
        return torch.empty_like(x, dtype=dtype or x.dtype).copy_(result)
    finally:
        _idle[0] = 1
