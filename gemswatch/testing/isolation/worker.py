"""The candidate's side: a process that loads candidate files and calls them.

Started by the judge (:mod:`.judge`), forked from it before any candidate is
loaded (or, when the judge has already initialised CUDA, as a fresh
interpreter; or, in a spare stage, ahead of the stage by the spare, and
handed the stage before it loads a candidate: :func:`main_spare`). It
serves one request at a time on its socket:

- ``{"op": "load", "path", "shown"}``: execute the file (the same loader and
  the same error messages as an in-process override);
- ``{"op": "function", "file", "name"}``: check that the file defines the
  callable ``name``;
- ``{"op": "call", "file", "name"}`` with the arguments: call it
  and answer its result (with ``peak_bytes``, the device memory the call
  held beyond what was allocated as it began, on CUDA), or the exception it raised.

Nothing this process says is trusted by the judge: it answers with plain
bytes and descriptions that the judge rebuilds and checks itself. What it
reports (torch modes left active, a tensor subclass returned, a result that
lives in an argument's memory) only sharpens the judge's messages.
"""

from __future__ import annotations

import errno
import importlib
import os
import signal
import socket
import sys
import threading
import time
import traceback
import weakref
from collections import deque
from pathlib import Path
from typing import Any

import torch

from ...override.errors import OverrideError
from ...override.loading import LoadedFile, _load_module
from . import transport
from .sandbox import restrict
from .timed import KEPT_RESULTS, TimedCase, own_tensors, poison_, storages

__all__ = ["SANDBOX_ENV", "serve", "main"]

# "off" (in config.yaml's env:) lets candidates write anywhere again: for
# debugging a candidate that writes files; verdicts are weaker then.
SANDBOX_ENV = "GEMSWATCH_CANDIDATE_SANDBOX"

_TRACEBACK_CHARS = 8000
_TIMING_OPS = frozenset({"time-start", "time-reps", "time-outputs", "time-settle"})


def _modes() -> list[str]:
    """The torch function and dispatch modes active now."""
    found = []
    if torch._C._len_torch_function_stack():
        found.append(f"{torch._C._len_torch_function_stack()} torch function mode(s)")
    if torch._C._len_torch_dispatch_stack():
        found.append(f"{torch._C._len_torch_dispatch_stack()} torch dispatch mode(s)")
    return found


def _both(before: list[str], after: list[str]) -> list[str]:
    """What was active when the call began, and what it left active."""
    return [f"{m} active when the call began" for m in before] + [
        f"{m} left active by the call" for m in after if m not in before
    ]


def _where(e: BaseException, folders: set[str]) -> str:
    """``file:line in function: code`` of the innermost frame in the
    candidate's own files (its folder) of ``e``'s traceback, or of the error
    it was raised from (a kernel's error comes wrapped by Triton's launcher),
    else ''."""
    chain, seen = [], set()
    while e is not None and id(e) not in seen:  # the original error last
        seen.add(id(e))
        chain.append(e)
        e = e.__cause__ or e.__context__
    for err in reversed(chain):
        for frame in reversed(traceback.extract_tb(err.__traceback__)):
            if any(frame.filename.startswith(folder + os.sep) for folder in folders):
                code = f": {frame.line.strip()}" if frame.line else ""
                return f"{frame.filename}:{frame.lineno} in {frame.name}{code}"[:400]
    return ""


def _error(e: BaseException, folders: set[str] = frozenset()) -> dict[str, Any]:
    kind = type(e)
    text = "".join(traceback.format_exception(kind, e, e.__traceback__))
    message = str(e)[:2000]
    if isinstance(e, OSError) and e.errno in (errno.EACCES, errno.EPERM):
        message += (f" (the candidate's sandbox: it may write only to its scratch folder $TMPDIR, /dev and the "
                    f"compiler caches, and may not signal other processes; {SANDBOX_ENV}=off lifts it)")
    return {
        "error": {
            "module": kind.__module__,
            "type": kind.__qualname__,
            "message": message,
            "traceback": text[-_TRACEBACK_CHARS:],
            "where": _where(e, folders),
        }
    }


def _plain_outputs(value: Any) -> tuple[Any, list[str]]:
    """``value`` with every tensor subclass replaced by its plain data, and
    what was replaced (the judge fails the call for it)."""
    subclasses: list[str] = []

    def plain(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            if type(v) is not torch.Tensor:
                subclasses.append(f"{type(v).__module__}.{type(v).__qualname__}")
                with torch._C.DisableTorchFunctionSubclass():
                    v = v.as_subclass(torch.Tensor)
            return v
        if isinstance(v, tuple):
            return tuple(plain(x) for x in v)
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v

    return plain(value), subclasses


class _Worker:
    def __init__(self, sock: socket.socket, preload: threading.Thread | None = None):
        self.sock = sock
        self.preload = preload  # joined before a candidate loads: two threads never import at once
        self.files: dict[str, LoadedFile] = {}
        self.timed: TimedCase | None = None
        self.results = _Returned()
        self.arena = transport.Arena()  # what the worker answers
        self.mappings = transport.Mappings()  # what the judge sends

    def folders(self) -> set[str]:
        """The folders of the loaded candidate files (their own code lives there)."""
        return {os.path.dirname(os.path.abspath(f)) for f in self.files}

    def answer(self, header: dict[str, Any], fd: int | None) -> tuple[dict[str, Any], transport.Packed | None]:
        op = header.get("op")
        if op == "load":
            if self.preload is not None:
                self.preload.join()
            path = str(header.get("path"))
            try:
                self.files[path] = _load_module(Path(path), str(header.get("shown") or path))
            except OverrideError as e:
                return {"override_error": str(e)}, None
            return {"ok": True}, None
        if op == "function":
            loaded = self.files.get(str(header.get("file")))
            if loaded is None:
                return {"override_error": f"{header.get('file')} was not loaded"}, None
            try:
                loaded.function(str(header.get("name")))
            except OverrideError as e:
                return {"override_error": str(e)}, None
            return {"ok": True}, None
        if op == "call":
            return self.call(header, fd)
        if op in _TIMING_OPS:
            return self.time(op, header, fd)
        return {"override_error": f"unknown request {op!r}"}, None

    def time(self, op: str, header: dict[str, Any], fd: int | None) -> tuple[dict[str, Any], transport.Packed | None]:
        """A step of a timed case (see :mod:`.timed`); an exception of the
        candidate is answered like one of a call."""
        if op == "time-start":
            loaded = self.files[str(header.get("file"))]
            func = loaded.function(str(header.get("name")))
            # A copy of the descriptor: the one received is closed by serve().
            sets, received = transport.unpack(header, None if fd is None else os.dup(fd), own=True,
                                              mappings=self.mappings)
            received.close()
            self.timed = None  # the previous case's inputs go first
            self.timed = TimedCase(func, [(tuple(a), dict(k)) for a, k in sets], header["timer"],
                                   seed=int(header.get("seed", 0)), keep=int(header.get("keep", KEPT_RESULTS)),
                                   key=int(header.get("key", 0)))
        case = self.timed
        if case is None:
            return {"override_error": f"{op} without a time-start"}, None
        before = _modes()
        try:
            if op == "time-start":
                reply = case.start()
            elif op == "time-reps":
                reply = case.reps(int(header["n"]), int(header["seed"]), bool(header.get("first")))
            elif op == "time-settle":
                reply = case.settle(int(header["n"]), int(header["seed"]))
            else:
                values = case.outputs([int(i) for i in header.get("reps", [])])
                values, subclasses = _plain_outputs(values)
                packed = transport.pack(values, arena=self.arena, ok=True, subclasses=subclasses,
                                        reused=case.reused(),
                                        modes=_both(before, _modes()))
                return packed.header, packed
        except BaseException as e:  # the candidate's failure is the judge's to judge
            return {**_error(e, self.folders()), "modes": _both(before, _modes())}, None
        return {**reply, "ok": True, "modes": _both(before, _modes())}, None

    def call(self, header: dict[str, Any], fd: int | None) -> tuple[dict[str, Any], transport.Packed | None]:
        loaded = self.files[str(header.get("file"))]
        func = loaded.function(str(header.get("name")))
        clock = time.perf_counter
        t0 = clock()
        (args, kwargs), inputs = transport.unpack(header, fd, own=False, mappings=self.mappings)
        before = _modes()
        allocated = _peak_start()
        t1 = clock()
        try:
            out = func(*args, **kwargs)
            if allocated is not None:
                torch.cuda.synchronize()  # its device work counts as the candidate's, not as packing
        except BaseException as e:  # a skip, an exit or a crash of the candidate is the judge's to judge
            _write_back(inputs)
            return {**_error(e, self.folders()), "modes": _both(before, _modes())}, None
        t2 = clock()
        peak = _peak_end(allocated)
        modes = _both(before, _modes())
        _write_back(inputs)
        out, subclasses = _plain_outputs(out)
        mine = own_tensors(out, storages(inputs.tensors))  # the result's memory, not the inputs'
        reused = self.results.returned_again(mine)
        try:
            packed = transport.pack(out, aliases=inputs.tensors, arena=self.arena, ok=True, modes=modes,
                                    subclasses=subclasses, reused=reused, peak_bytes=peak)
        except transport.TransportError as e:
            return {**_error(e, self.folders()), "modes": modes}, None
        # Its bytes are on their way: the memory it leaves must not hold a
        # right answer for the next call to find (see .timed.poison_).
        poison_(mine)
        self.results.remember(mine)
        inputs.close()
        # Where the call's time went, for the stage's log (see judge.CallTimes).
        packed.header["worker_ms"] = {"unpack": (t1 - t0) * 1e3, "call": (t2 - t1) * 1e3,
                                      "pack": (clock() - t2) * 1e3}
        return packed.header, packed


def _peak_start() -> int | None:
    """Bytes allocated on the device as a call begins, with the peak reset (None off CUDA)."""
    if not torch.cuda.is_initialized():
        return None
    torch.cuda.reset_peak_memory_stats()
    return torch.cuda.memory_allocated()


def _peak_end(allocated: int | None) -> int | None:
    """The most the call held beyond what was allocated as it began: a claim
    the judge bounds (see the benchmark's memory module)."""
    if allocated is None:
        return None
    return max(0, torch.cuda.max_memory_allocated() - allocated)


class _Returned:
    """The storages of the results answered so far that are still alive:
    the candidate kept them. One returned again is a result kept from an
    earlier call (its values were poisoned when it was answered)."""

    def __init__(self, size: int = 64):
        self.refs: deque[weakref.ref] = deque(maxlen=size)

    def returned_again(self, tensors: list[torch.Tensor]) -> int:
        alive = {id(s) for s in (r() for r in self.refs) if s is not None}
        return sum(id(t.untyped_storage()) in alive for t in tensors)

    def remember(self, tensors: list[torch.Tensor]) -> None:
        for t in tensors:
            self.refs.append(weakref.ref(t.untyped_storage()))


def _start_device() -> None:
    """Create this process's CUDA context in the background (about a second),
    while the candidate loads and the judge builds its first inputs."""
    if not torch.cuda.is_available():
        return

    def start() -> None:
        try:
            torch.empty(1, device="cuda")
        except Exception:  # noqa: BLE001 - the first call reports it properly
            pass

    threading.Thread(target=start, name="gemswatch-cuda-start", daemon=True).start()


# What candidates build on, imported while the judge imports the library
# (the candidate's own import of them then finds them loaded). Imported,
# never enabled: a candidate's torch calls still reach torch's kernels.
PRELOAD = ("triton", "triton.language", "gemswatch.gems")


def _preload() -> threading.Thread:
    def load() -> None:
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the candidate's own import reports it
                return

    thread = threading.Thread(target=load, name="gemswatch-preload", daemon=True)
    thread.start()
    return thread


def _write_back(inputs: transport.Packed) -> None:
    """Copy device inputs back into the shared file, so the judge sees what
    the candidate wrote (CPU inputs live in the file already)."""
    for t, region in zip(inputs.tensors, inputs.regions):
        if t.device.type != "cpu" and region.numel():
            region.copy_(transport.storage_bytes(t))


def serve(sock: socket.socket, scratch: Path | None = None, protected: tuple[Path, ...] = ()) -> None:
    """Sandbox this process (:mod:`.sandbox`), then answer requests until the
    judge closes the socket; then exit."""
    # The judge's command line names the stage; the candidate's need not.
    # (A determined candidate can still tell a timed call from its stack:
    # the verdicts never rely on its not knowing.)
    sys.argv = ["gemswatch-candidate-worker"]
    if os.environ.get(SANDBOX_ENV) != "off":
        box = restrict(list(protected) + [Path.cwd()], scratch)
        print(f"gemswatch: {box.describe()}", file=sys.stderr, flush=True)
    _start_device()
    worker = _Worker(sock, preload=_preload())
    while True:
        try:
            header, fd = transport.receive(sock)
        except (OSError, transport.TransportError):
            break
        if header is None:
            break
        packed = None
        try:
            reply, packed = worker.answer(header, fd)
        except BaseException as e:  # noqa: BLE001 - the judge hears of everything
            reply = _error(e)
        finally:
            if fd is not None and packed is None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        try:
            transport.send(sock, reply, packed.fd if packed is not None else None)
        except (OSError, transport.TransportError) as e:
            try:
                transport.send(sock, _error(e))
            except OSError:
                break
        finally:
            if packed is not None:
                packed.close()
    os._exit(0)


def main(argv: list[str]) -> None:
    """Entry point of a worker started as a fresh interpreter:
    ``FD SCRATCH [PROTECTED...]``."""
    serve(socket.socket(fileno=int(argv[0])), Path(argv[1]), tuple(Path(p) for p in argv[2:]))


def main_spare(argv: list[str]) -> None:
    """Entry point of a worker started ahead of its stage by a spare
    (:mod:`gemswatch.warmpool.worker_spare`): ``FD``. Preloads and creates
    the CUDA context now, then waits for the stage and serves it."""
    from ...warmpool import worker_spare
    from .judge import _die_with_parent

    _die_with_parent()
    if os.getppid() == 1:  # the spare died before the line above
        os._exit(0)
    sock = socket.socket(fileno=int(argv[0]))
    _preload().join()
    if torch.cuda.is_available():
        try:
            torch.zeros(1, device="cuda")
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - the first call reports it properly
            pass
    files = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and os.path.isabs(path) and path not in files:
            try:
                st = os.stat(path)
            except OSError:
                continue
            files[path] = [st.st_mtime_ns, st.st_size, st.st_ino]
    try:
        sock.send(worker_spare.ready_message(files))
    except OSError:
        os._exit(0)
    stage = worker_spare.receive_stage(sock)
    if stage is None:
        os._exit(0)
    worker_spare.become_stage(*stage)
    # As a worker forked from the judge has it: Ctrl-C ends it, a crash dumps its stack.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    import faulthandler

    faulthandler.enable(file=sys.__stderr__)
    msg = stage[0]
    serve(sock, Path(msg["scratch"]), tuple(Path(p) for p in msg["protected"]))
