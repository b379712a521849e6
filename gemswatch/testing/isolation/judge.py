"""The judge's side: candidates that run in a worker process of their own.

A :class:`WorkerSource` is the :class:`~gemswatch.override.loading.CandidateSource`
of an isolated session: it starts one worker (:mod:`.worker`) before any
candidate is loaded, has the worker load each candidate file, and hands the
override registry a :class:`RemoteCandidate` per function. So the judge
process (the one that builds inputs, holds the reference, compares and
counts calls) never imports candidate code.

A call copies the arguments' whole storages into a memory file shared with
the worker and waits for the answer. Then the call has, in the judge, the
effects it had in the worker, and nothing else:

- what the candidate wrote into its arguments' memory (inside their views
  or around them) is written into the judge's arguments;
- a result that lives in an argument's memory is a view of the judge's
  argument; any other result is a plain tensor of the judge's own, rebuilt
  from bytes (:mod:`.transport`);
- an exception raised by the candidate is raised again here: the built-in
  exception types as themselves (so a test expecting an ``IndexError`` still
  gets one), a pytest skip, xfail, fail or exit as a failure (a skip decided
  by the candidate is not a pass), anything else as a ``RuntimeError``
  naming it; with the candidate's traceback as a note;
- a tensor subclass returned, or a torch function or dispatch mode active
  around the call, fails it (``output-type``, ``torch-mode``);
- a worker that dies fails the call, and every later one, with how it died.

The operator's contract (inputs left alone, in-place writes only to the
first argument, fresh memory for results) is then judged by the contract
guard around the call, in the judge, where the candidate cannot reach it.
"""

from __future__ import annotations

import builtins
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from ...override.errors import OverrideError
from ...warmpool import worker_spare
from ..integrity import IntegrityError
from . import transport
from .scheduling import Scheduling, scheduling_now

__all__ = ["CandidateCrashed", "CandidateWorker", "RemoteCandidate", "WorkerSource", "check_results", "stage_output_fds"]

# Built-in exceptions a candidate may raise through the boundary as themselves.
_REraisable = {
    name: getattr(builtins, name)
    for name in (
        "ArithmeticError", "AssertionError", "AttributeError", "FloatingPointError", "IndexError", "KeyError",
        "LookupError", "MemoryError", "NotImplementedError", "OverflowError", "RecursionError", "RuntimeError",
        "TypeError", "ValueError", "ZeroDivisionError",
    )
}


# pytest's outcome exceptions (their __module__ claims to be builtins).
_PYTEST_OUTCOMES = frozenset({"Skipped", "XFailed", "Failed", "Exit"})


class CandidateCrashed(RuntimeError):
    """The worker running the candidate died."""


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def stage_output_fds(config: Any) -> tuple[int, int]:
    """The stage's real stdout and stderr (its log): pytest's capture has put
    temporary files on descriptors 1 and 2 and keeps the originals aside."""
    fds = [1, 2]
    manager = config.pluginmanager.get_plugin("capturemanager") if config is not None else None
    capturing = getattr(manager, "_global_capturing", None)
    for i, name in enumerate(("out", "err")):
        saved = getattr(getattr(capturing, name, None), "targetfd_save", None)
        if isinstance(saved, int):
            fds[i] = saved
    return fds[0], fds[1]


@dataclass
class CallTimes:
    """Where a session's candidate calls spent their time (ms): the round
    trips and the judge's own packing as the judge measured them, the rest
    as the worker reports it (a hint for a reader, never evidence: the
    worker is the candidate's process)."""

    calls: int = 0
    round_trip_ms: float = 0.0  # request sent to reply received
    judge_moving_ms: float = 0.0  # the judge packing arguments and unpacking results
    in_candidate_ms: float = 0.0  # the worker's word: the candidate's calls, their device work included
    worker_moving_ms: float = 0.0  # the worker's word: unpacking arguments, packing results

    def add(self, round_trip_ms: float, judge_moving_ms: float, worker: Any) -> None:
        self.calls += 1
        self.round_trip_ms += round_trip_ms
        self.judge_moving_ms += judge_moving_ms
        if isinstance(worker, dict):
            self.in_candidate_ms += _ms(worker.get("call"))
            self.worker_moving_ms += _ms(worker.get("unpack")) + _ms(worker.get("pack"))

    def line(self) -> str:
        """One line for the stage's log."""
        s = 1e-3
        return (f"candidate calls: {self.calls}, {self.round_trip_ms * s:.2f} s of round trips "
                f"(the worker says {self.in_candidate_ms * s:.2f} s in the candidate, "
                f"{self.worker_moving_ms * s:.2f} s moving tensors), "
                f"{self.judge_moving_ms * s:.2f} s moving tensors in the judge")


def _ms(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) and value >= 0 else 0.0


class CandidateWorker:
    """One worker process and the socket to it; requests are serialised."""

    def __init__(self, output_fds: tuple[int, int] = (1, 2), protected: tuple[Path, ...] = ()):
        self._lock = threading.Lock()
        # One call at a time, from packing its arguments to reading its
        # result: the arena holds one message (see transport.Arena).
        self.call_lock = threading.RLock()
        self.arena = transport.Arena()  # what the judge sends
        self.times = CallTimes()  # where this session's calls spent their time
        self.mappings = transport.Mappings()  # what the worker sends
        # The worker's scratch folder: the one place of its own it may write (see .sandbox).
        self.scratch = Path(tempfile.mkdtemp(prefix="gemswatch-candidate-"))
        self.protected = tuple(protected)
        self.died: str | None = None  # how the worker died, once it has
        self.judge_scheduling = scheduling_now()  # this process's, before any candidate code runs (.scheduling)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        for s in (mine, theirs):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, transport.MAX_HEADER + 4096)
        self.sock = mine
        out, err = output_fds
        self._fresh: subprocess.Popen | None = None  # the worker, when started as a fresh interpreter
        self.pid = self._start(mine, theirs, out, err)
        theirs.close()

    def _start(self, mine: socket.socket, theirs: socket.socket, out: int, err: int) -> int:
        spare = worker_spare.take()  # started with this stage's judge, when it was a spare
        if spare is not None:
            mine.close()
            self.sock = spare.sock
            self._fresh = spare.proc
            return spare.hand_over(out, err, self.scratch, self.protected)
        if torch.cuda.is_initialized() or _native_threads():
            # A forked child cannot use its parent's CUDA context, and a thread
            # pool (OpenMP's) forked mid-flight can hang it: start afresh.
            code = "import sys; from gemswatch.testing.isolation.worker import main; main(sys.argv[1:])"
            self._fresh = subprocess.Popen(
                [sys.executable, "-c", code, str(theirs.fileno()), str(self.scratch), *map(str, self.protected)],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            )
            return self._fresh.pid
        pid = os.fork()
        if pid:
            return pid
        try:  # the worker: the socket, the stage's log, and nothing of the judge's sessions
            mine.close()  # else the judge closing its end would never reach the worker as end of file
            _die_with_parent()
            os.dup2(out, 1)
            os.dup2(err, 2)
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            import faulthandler

            faulthandler.enable(file=sys.__stderr__)
            from .worker import serve

            serve(theirs, self.scratch, self.protected)
        finally:
            os._exit(70)

    def request(self, header: dict[str, Any], fd: int | None = None) -> tuple[dict[str, Any], int | None]:
        """Send one request and wait for its answer."""
        __tracebackhide__ = True  # plumbing: a failure shows the test's frame and the candidate's
        with self._lock:
            if self.died is not None:
                raise CandidateCrashed(f"the candidate's worker process died earlier ({self.died})")
            try:
                transport.send(self.sock, header, fd)
                reply, reply_fd = transport.receive(self.sock)
            except OSError:
                reply, reply_fd = None, None
            if reply is None:
                self.died = self._reap()
                raise CandidateCrashed(f"the candidate's worker process died ({self.died})")
            return reply, reply_fd

    def __repr__(self) -> str:
        return "<candidate worker>"

    def _reap(self) -> str:
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return "exit status unknown"
        code = os.waitstatus_to_exitcode(status)
        return f"killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"

    def close(self, grace: float = 5.0) -> None:
        """End the worker: it exits when its socket closes (killed after ``grace`` s)."""
        try:
            self.sock.close()
        except OSError:
            pass
        if self.died is not None:
            self._forget_scratch()
            return
        self.died = "closed"
        deadline = time.monotonic() + grace
        try:
            while time.monotonic() < deadline:
                if os.waitpid(self.pid, os.WNOHANG)[0]:
                    return
                time.sleep(0.005)
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except ChildProcessError:  # already reaped
            pass
        finally:
            self._forget_scratch()

    def _forget_scratch(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)
        self.arena.close()


def _native_threads() -> bool:
    """Whether this process runs threads Python does not know of (a native
    thread pool); Python's own threads are safe to fork past."""
    try:
        return len(os.listdir("/proc/self/task")) > threading.active_count()
    except OSError:
        return False


def _die_with_parent() -> None:
    """Linux: the worker is killed when the judge dies, however it dies."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class _WorkerFile:
    """A candidate file loaded in the worker (a :class:`LoadedFile`)."""

    module = None  # it lives in the worker
    added = None

    def __init__(self, worker: CandidateWorker, path: Path):
        self.worker = worker
        self.path = path

    def function(self, name: str) -> Callable:
        reply, _ = self.worker.request({"op": "function", "file": str(self.path), "name": name})
        if "override_error" in reply:
            raise OverrideError(str(reply["override_error"]))
        return RemoteCandidate(self.worker, self.path, name)

    def undo(self) -> None:
        pass  # nothing of it is in this process


class WorkerSource:
    """Loads candidate files in one worker process (a :class:`CandidateSource`)."""

    def __init__(self, output_fds: tuple[int, int] = (1, 2), protected: tuple[Path, ...] = ()) -> None:
        # Now: before anything else is imported. ``protected``: the project,
        # which no place the sandboxed worker may write can contain.
        self.worker = CandidateWorker(output_fds, protected)

    def load(self, path: Path, shown: str) -> _WorkerFile:
        reply, _ = self.worker.request({"op": "load", "path": str(path), "shown": shown})
        if "override_error" in reply:
            raise OverrideError(str(reply["override_error"]))
        return _WorkerFile(self.worker, path)

    @property
    def pid(self) -> int:
        return self.worker.pid

    @property
    def judge_scheduling(self) -> Scheduling:
        """This process's CPU scheduling before the worker started (:mod:`.scheduling`)."""
        return self.worker.judge_scheduling

    @property
    def died(self) -> str | None:
        """How the worker died during the session, if it did."""
        return None if self.worker.died == "closed" else self.worker.died

    @property
    def times(self) -> CallTimes:
        """Where the session's candidate calls spent their time."""
        return self.worker.times

    def close(self) -> None:
        self.worker.close()


class RemoteCandidate:
    """A candidate function that runs in the worker; calling it is a round trip."""

    def __init__(self, worker: CandidateWorker, path: Path, name: str):
        self.worker = worker
        self.path = path
        self.__name__ = self.__qualname__ = name
        self.__doc__ = f"{name} from {path}, run in an isolated worker process"
        self.fastest_ms: float | None = None  # the judge's wall time of the fastest call so far
        # What the worker says the last call held on the device: a claim,
        # bounded by the benchmark before it is reported (memory.check_claimed_peak).
        self.claimed_peak_bytes: Any = None

    def __repr__(self) -> str:
        return f"<isolated candidate {self.__name__} from {self.path}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        with self.worker.call_lock:
            return self._call(args, kwargs)

    def _call(self, args: tuple, kwargs: dict) -> Any:
        __tracebackhide__ = True
        clock = time.perf_counter
        t_pack = clock()
        try:
            packed = transport.pack((args, kwargs), arena=self.worker.arena, op="call", file=str(self.path),
                                    name=self.__name__)
        except transport.TransportError as e:
            raise TypeError(str(e)) from None
        try:
            t0 = clock()
            reply, fd = self.worker.request(packed.header, packed.fd)
            t1 = clock()
            took = (t1 - t0) * 1e3
            self.fastest_ms = took if self.fastest_ms is None else min(self.fastest_ms, took)
            self.claimed_peak_bytes = reply.get("peak_bytes")
            try:
                return self._result(reply, fd, packed)
            finally:
                if fd is not None:
                    os.close(fd)
                self.worker.times.add(took, ((t0 - t_pack) + (clock() - t1)) * 1e3, reply.get("worker_ms"))
        finally:
            packed.close()

    def _result(self, reply: dict[str, Any], fd: int | None, sent: transport.Packed) -> Any:
        __tracebackhide__ = True
        if reply.get("modes"):
            raise IntegrityError(
                "torch-mode",
                f"{'; '.join(map(str, reply['modes']))} in the candidate {self.__name__}'s process; "
                "a candidate may not intercept torch's operators",
            )
        # What the candidate wrote into its arguments' memory, the judge's
        # arguments get: the contract guard around this call judges it.
        done: set[int] = set()
        for t, region, meta in zip(sent.tensors, sent.regions, sent.header["tensors"]):
            if region.numel() and meta["at"] not in done:
                transport.storage_bytes(t).copy_(region)
                done.add(meta["at"])
        if "error" in reply:
            raise _reraise(reply["error"], self.__name__)
        value, received = transport.unpack(reply, None if fd is None else os.dup(fd), own=True, aliases=sent.tensors,
                                           mappings=self.worker.mappings)
        received.close()
        check_results(reply, self.__name__)
        return value


def check_results(reply: dict[str, Any], name: str, timed: bool = False) -> None:
    """What the worker says of the results it answered, judged: a tensor
    subclass (``output-type``), or memory it had answered before
    (``cached-output``; ``timed-output`` for a timed case's results)."""
    __tracebackhide__ = True
    if reply.get("subclasses"):
        raise IntegrityError(
            "output-type",
            f"the candidate {name} returned a tensor subclass ({', '.join(map(str, reply['subclasses']))})"
            f"{' when it was timed' if timed else ''}; return plain torch.Tensor results",
        )
    if reply.get("reused"):
        raise IntegrityError(
            "timed-output" if timed else "cached-output",
            f"the candidate {name} returned the memory of a result it had returned before"
            f"{' (' + str(reply['reused']) + ' of its last timed results)' if timed else ''}; "
            "every call must compute a new result in new memory",
        )


def _reraise(error: Any, name: str) -> BaseException:
    """The exception the judge raises for one the candidate raised."""
    if not isinstance(error, dict):
        return RuntimeError(f"the candidate {name} failed, and its worker's answer was malformed")
    module, kind, message = str(error.get("module")), str(error.get("type")), str(error.get("message"))
    own = str(error.get("where") or "")  # the innermost line of the candidate's own code
    where = own or _last_frame(str(error.get("traceback") or ""))
    if module == "builtins" and kind in _REraisable:
        e = _REraisable[kind](message)
    elif module.startswith(("_pytest", "pytest")) or kind in _PYTEST_OUTCOMES:
        e = AssertionError(
            f"the candidate {name} raised pytest's {kind} ({message}): a skip, xfail or exit decided by the "
            "candidate fails the case; only the test may skip"
        )
    elif module == "builtins" and kind in ("SystemExit", "KeyboardInterrupt", "GeneratorExit"):
        e = RuntimeError(f"the candidate {name} raised {kind}({message}) during the call")
    else:
        e = RuntimeError(f"{module}.{kind}: {message}" if module != "builtins" else f"{kind}: {message}")
    if own:  # in the message itself: the one line a verdict shows names the candidate's file
        e.args = (f"{e.args[0] if e.args else ''} (at {own})",)
    if where:
        e.add_note(f"raised by the candidate at {where}")
    traceback_text = str(error.get("traceback") or "")
    if traceback_text:
        e.add_note("the candidate's traceback (in its worker process):\n" + traceback_text.rstrip())
    return e


def _last_frame(traceback_text: str) -> str:
    """``file:line`` of the innermost frame of a formatted traceback."""
    frames = [ln.strip() for ln in traceback_text.splitlines() if ln.strip().startswith('File "')]
    if not frames:
        return ""
    head = frames[-1]
    try:
        file = head.split('"', 2)[1]
        line = head.split("line ", 1)[1].split(",", 1)[0]
    except IndexError:
        return ""
    return f"{file}:{line}"
