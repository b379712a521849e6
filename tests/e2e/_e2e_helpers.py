"""Helpers shared by the end-to-end tests that start real processes or time a GPU
(and by scripts/stress.py and scripts/timer_check.py, which put this folder
on ``sys.path``).

Not ``_helpers``: that is the name candidate folders give their own helper
modules, and a test process may have one of those on ``sys.path``.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie is dead for our purpose."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_for(pred, timeout: float, what: str):
    """``pred()``'s first truthy value within ``timeout`` seconds; fails the
    test naming ``what`` otherwise."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def write_files(root: Path, files: dict[str, str]) -> Path:
    """Write each dedented text of ``files`` to ``root / relpath``; returns ``root``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def matmuls_on_two_streams(n: int = 2048, count: int = 10):
    """(on_timed_stream, on_side_stream): the same ``count`` n x n matmuls,
    queued on the current stream or hidden on another one (CUDA)."""
    import torch

    a = torch.randn(n, n, device="cuda")
    side = torch.cuda.Stream()

    def on_timed_stream():
        for _ in range(count):
            a @ a

    def on_side_stream():
        with torch.cuda.stream(side):
            on_timed_stream()

    return on_timed_stream, on_side_stream
