"""Print the figures that show the CUDA timer can be trusted, on this GPU.

    python scripts/timer_check.py

- the device-to-device copy bandwidth (the ceiling for memory-bound ops);
- the L2 flush: a copy whose data fits in L2, timed with and without it;
  a 256 MiB read timed with the flush, and with an overwrite-only flush that
  leaves L2 full of dirty lines;
- host overhead: a kernel behind 0.3 ms of Python, and the same kernel bare;
- hidden work: matmuls on a side stream, against the same on the timed stream.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
from _e2e_helpers import matmuls_on_two_streams  # noqa: E402

from gemswatch.testing.benchmark.timing import CudaEventTimer, copy_bandwidth_gbps  # noqa: E402


class OverwriteOnlyTimer(CudaEventTimer):
    """The flush without its read pass: L2 is left full of dirty lines."""

    def _flush(self) -> None:
        super()._flush()
        self._flush_buffers[0].zero_()


def main() -> None:
    timer = CudaEventTimer("cuda", warmup_ms=25, iter_ms=100)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"copy bandwidth (1 GiB, read + write): {copy_bandwidth_gbps(timer):.0f} GB/s")

    x = torch.randn(4 << 20, device="cuda")
    y = torch.empty_like(x)
    hot = CudaEventTimer("cuda", 25, 100, flush_l2=False)(lambda: y.copy_(x))
    cold = timer(lambda: y.copy_(x))
    print(f"16 MiB copy: {hot * 1e3:.1f} us without the L2 flush, {cold * 1e3:.1f} us with it ({cold / hot:.2f}x)")
    big = torch.randn(64 << 20, device="cuda")
    clean, dirty = timer(big.sum), OverwriteOnlyTimer("cuda", 25, 100)(big.sum)
    print(f"256 MiB sum: {clean * 1e3:.1f} us after the flush, {dirty * 1e3:.1f} us after an overwrite-only flush")

    def slow_host():
        end = time.perf_counter() + 0.3e-3
        while time.perf_counter() < end:
            pass
        y.copy_(x)

    print(f"copy behind 0.3 ms of Python: {timer(slow_host) * 1e3:.1f} us (bare: {cold * 1e3:.1f} us)")

    honest, hidden = matmuls_on_two_streams()
    print(f"10 matmuls: {timer(honest) * 1e3:.1f} us on the timed stream, {timer(hidden) * 1e3:.1f} us on a side stream")


if __name__ == "__main__":
    main()
