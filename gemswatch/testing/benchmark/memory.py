"""Peak device memory of one call: measured here, or claimed by the worker and bounded.

The figure is what one call held beyond what was allocated when it began
(``torch.cuda.max_memory_allocated`` after a reset, minus
``memory_allocated`` before): its result and its workspace. Measured that
way it compares a call in this process (the baseline, an in-process
candidate) with a call in the candidate's worker, whatever else each
process holds. None off CUDA.

The worker's figure is the candidate's process talking, so it is a claim:
:func:`check_claimed_peak` accepts it only between what the judge knows the
call must have held (the bytes of the fresh results it received: a result
lives in new memory, the contract says) and the device's whole memory.

Imports torch and the integrity error; never pytest or ``gemswatch.watch``.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from ..integrity import IntegrityError

__all__ = ["measured_peak", "fresh_result_bytes", "check_claimed_peak", "device_memory_bytes"]


def measured_peak(call: Callable[[], Any], device: str) -> tuple[Any, int | None]:
    """(the call's result, the peak bytes it held in this process; None off CUDA)."""
    if device != "cuda":
        return call(), None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = call()
    torch.cuda.synchronize()
    return out, max(0, torch.cuda.max_memory_allocated() - before)


def _storages(value: Any, into: dict[int, int]) -> None:
    if isinstance(value, torch.Tensor):
        if value.device.type != "cuda":
            return  # host memory is not what the figure counts
        s = value.untyped_storage()
        into[s.data_ptr()] = s.nbytes()
    elif isinstance(value, (tuple, list)):
        for v in value:
            _storages(v, into)
    elif isinstance(value, dict):
        for v in value.values():
            _storages(v, into)


def fresh_result_bytes(result: Any, inputs: Any) -> int:
    """Bytes of the result's device storages that are none of the inputs'
    (an in-place result lives in its input's memory and adds nothing)."""
    got: dict[int, int] = {}
    given: dict[int, int] = {}
    _storages(result, got)
    _storages(inputs, given)
    return sum(n for ptr, n in got.items() if ptr not in given)


def device_memory_bytes() -> int:
    """The current CUDA device's whole memory."""
    return int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)


def check_claimed_peak(op: str, claimed: Any, floor: int, ceiling: int) -> int:
    """The worker's peak figure for one call of ``op``, if it is possible:
    an integer between ``floor`` (what the call must have held) and
    ``ceiling`` (the device's memory); IntegrityError('reported-memory') otherwise."""
    if isinstance(claimed, bool) or not isinstance(claimed, int):
        raise IntegrityError("reported-memory", f"the candidate's worker reported no peak memory for a call of {op} "
                                                f"({type(claimed).__name__})")
    if not floor <= claimed <= ceiling:
        raise IntegrityError(
            "reported-memory",
            f"the candidate's worker reported {claimed} bytes of peak memory for a call of {op}; the call's fresh "
            f"results alone take {floor} bytes and the device has {ceiling}: impossible, rejected",
        )
    return claimed
