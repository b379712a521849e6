"""The warm pool: one interpreter imports the heavy modules once, then forks a
fresh pytest process for every stage.

The watcher (``gemswatch.watch.stage.warm_pool``) starts this file with the
stages' interpreter, in the project folder, with the stages' environment::

    python -c "<run this file>" gemswatch/warmpool/server.py CTL_FD '["gemswatch.gems", "torch", ...]'

It imports the ``preload`` modules in order (CUDA is not initialised:
``PYTORCH_NVML_BASED_CUDA_CHECK=1`` keeps ``torch.cuda.is_available()``
fork-safe), freezes the garbage collector's view of them, reports ``ready``
on the control socket and serves one request per stage. The pool itself
never runs a session, so every child starts from the same clean preloaded
state. A child becomes a stage exactly as ``python -m pytest ARGS`` would
start: a new session and process group, the requested working folder,
environment and ``sys.path``, the signal dispositions of a fresh interpreter,
stdin from /dev/null, stdout and stderr into the stage log; it runs pytest
in-process and exits with pytest's code (a signal shows as a signal).

Protocol (``SOCK_SEQPACKET``, one JSON object per message):

- control socket, watcher -> pool: ``{"op": "spawn", "argv", "cwd", "env"}``
  with two descriptors attached (the stage's reply socket and its log file),
  or ``{"op": "drain"}`` (take no more stages; exit when the last is done).
  End of file on it means the watcher is gone: every child's process group
  is killed and the pool exits.
- control socket, pool -> watcher, once: ``{"event": "ready", ...}`` or
  ``{"event": "failed", "reason", "message"}``.
- reply socket, pool -> watcher: ``{"event": "started", "pid"}`` or
  ``{"event": "refused", "reason", "message"}``, later
  ``{"event": "exit", "returncode"}`` (negative: killed by that signal).
  Closing it early kills the stage's process group.

A spawn is refused as ``stale`` when a file of any preloaded module changed
since the preload (checked before every fork), and as ``polluted`` when a
candidate module or a replaced operator shows up in the pool: the watcher
then starts a new pool, so a stale preload never produces a result.

It is run by path (``runpy.run_path``) in the stages' interpreter, which
may not have gemswatch installed, so it stays one file that imports only
the standard library (and is longer than gemswatch's other modules).
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import json
import os
import selectors
import signal
import socket
import sys
import threading
import time
import traceback

__all__ = ["PER_STAGE_KEYS", "main"]

# Environment variables that may differ between the pool and a stage: they
# are read by nothing the pool imports (the pool never initialises CUDA;
# the candidate's caches are set up by its worker, after the hand-over).
PER_STAGE_KEYS = frozenset(
    {"PYTHONPATH", "GEMSWATCH_IMPORT_PATH", "GEMSWATCH_RUN_ID", "CUDA_VISIBLE_DEVICES", "GEMSWATCH_CANDIDATE_CACHES"}
)
CANDIDATE_PREFIX = "gemswatch_candidate_"
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"
MAX_MESSAGE = 1 << 20
# A preloaded file whose mtime is this close to (or after) the start of the
# preload may have changed after it was imported: the pool refuses to serve.
# Larger than the file system's timestamp granularity (one kernel tick).
MTIME_SLACK_NS = 50_000_000


def _load_signal_scope():
    """The sibling module that confines a stage's signals (loaded by path,
    like this file)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "signal_scope.py")
    spec = importlib.util.spec_from_file_location("_gemswatch_signal_scope", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_signal_scope = _load_signal_scope()


def _send(sock: socket.socket, **message) -> None:
    sock.sendall(json.dumps(message).encode())


def _killpg(pgid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _file_state(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _pythonpath_entries(env: dict[str, str]) -> list[str]:
    """sys.path entries that PYTHONPATH gives a fresh interpreter (absolute, like site.py)."""
    raw = env.get("PYTHONPATH", "")
    return [os.path.abspath(p) for p in raw.split(os.pathsep)] if raw else []


class PreloadError(Exception):
    def __init__(self, reason: str, message: str, module: str | None = None):
        super().__init__(message)
        self.reason = reason
        self.module = module  # the preloaded module that caused it, when one did


def _cuda_initialised() -> bool:
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    return cuda is not None and bool(getattr(cuda, "is_initialized", lambda: False)())


class Pool:
    """The server: preload once, then fork per request."""

    def __init__(self, ctl: socket.socket, preload: list[str], spare: dict | None = None):
        self.ctl = ctl
        self.preload = list(preload)
        self.spare = dict(spare or {})  # empty: a pool that forks
        self.sel: selectors.BaseSelector | None = None
        self.wake_r = self.wake_w = -1
        self.worker_spare = None  # the module that holds the candidate's pre-started worker
        self.children: dict[int, socket.socket] = {}  # stage pid -> its reply socket
        self.draining = False
        self.env_set: dict[str, str] = {}
        self.env_unset: list[str] = []
        self.handlers: dict[int, object] = {}
        self.files: dict[str, tuple[int, int, int] | None] = {}
        self.attrs: dict[str, dict[str, int]] = {}
        self.path_tail: list[str] = []

    # -- preload ---------------------------------------------------------------

    def load(self) -> dict:
        start_ns = self.start_ns = time.time_ns()
        t0 = self.t0 = time.monotonic()
        env_before = dict(os.environ)
        pool_pythonpath = set(_pythonpath_entries(env_before))
        own_nvml = NVML_CHECK not in os.environ
        if own_nvml:
            # torch.cuda.is_available() through NVML creates no CUDA context,
            # so forked children can still use the GPU.
            os.environ[NVML_CHECK] = "1"
        cuda_by = None  # the first preloaded module after whose import CUDA was up
        try:
            for name in self.preload:
                try:
                    importlib.import_module(name)
                except BaseException as e:  # noqa: BLE001 - any failure means "no warm start"
                    raise PreloadError(
                        "import", f"preload {name}: {type(e).__name__}: {e}".rstrip(": ")
                    ) from e
                if cuda_by is None and not self.spare and _cuda_initialised():
                    cuda_by = name
        finally:
            if own_nvml:
                os.environ.pop(NVML_CHECK, None)
        env_after = dict(os.environ)
        self.env_set = {k: v for k, v in env_after.items() if env_before.get(k) != v and k not in PER_STAGE_KEYS}
        self.env_unset = [k for k in env_before if k not in env_after and k not in PER_STAGE_KEYS]
        if threading.active_count() != 1 and not self.spare:  # a spare never forks
            names = ", ".join(t.name for t in threading.enumerate() if t is not threading.main_thread())
            raise PreloadError("threads", f"preloading started Python threads ({names}); a fork would lose them")
        if cuda_by is not None:
            raise PreloadError("cuda", f"importing {cuda_by} initialised CUDA; forked stages could not use the GPU",
                               module=cuda_by)
        # The dispositions a fresh interpreter has once these modules are imported.
        for sig in signal.valid_signals():
            if sig in (signal.SIGKILL, signal.SIGSTOP):
                continue
            try:
                self.handlers[sig] = signal.getsignal(sig)
            except (OSError, ValueError):
                pass
        self.files = self._snapshot()
        for path, state in self.files.items():
            if state is not None and state[0] >= start_ns - MTIME_SLACK_NS:
                raise PreloadError("changed", f"{path} changed while it was being preloaded")
        self.attrs = {
            name: {k: id(v) for k, v in vars(sys.modules[name]).items()} for name in self.preload if name in sys.modules
        }
        self.path_tail = [p for p in sys.path[1:] if p not in pool_pythonpath]
        # Preloaded objects live as long as the pool: keep them out of every
        # collection (children's gc passes stay short, shared pages stay shared).
        gc.collect()
        gc.freeze()
        return {
            "event": "ready",
            "pid": os.getpid(),
            "preload": self.preload,
            "seconds": round(time.monotonic() - t0, 3),
            "modules": len(sys.modules),
            "files": len(self.files),
            "local_files": sorted(p for p in self.files if not self._is_installed(p)),
            "env_set": sorted(self.env_set),
        }

    def prepare_spare(self, info: dict, start_ns: int) -> dict:
        """After the preload: CUDA up, the candidate's worker ready; their
        files join the staleness check."""
        device = None
        if self.spare.get("cuda"):
            torch = sys.modules.get("torch")
            try:
                if torch is not None and torch.cuda.is_available():
                    torch.zeros(1, device="cuda")
                    torch.cuda.synchronize()
                    device = torch.cuda.get_device_name()
            except BaseException as e:  # noqa: BLE001 - a stage here would fail the same way
                raise PreloadError("cuda", f"initialising CUDA: {type(e).__name__}: {e}") from e
        worker = {}
        if self.worker_spare is not None:
            try:
                worker = self.worker_spare.wait_ready()
            except BaseException as e:  # noqa: BLE001
                raise PreloadError("worker", f"the candidate's spare worker: {type(e).__name__}: {e}") from e
            for path, state in worker.items():
                state = tuple(state) if state is not None else None
                if state is not None and state[0] >= start_ns - MTIME_SLACK_NS:
                    raise PreloadError("changed", f"{path} changed while it was being preloaded")
                self.files.setdefault(path, state)
        # What creating the CUDA context changed in the preloaded modules is the
        # spare's own doing; only what changes after it is pollution.
        self.attrs = {
            name: {k: id(v) for k, v in vars(sys.modules[name]).items()} for name in self.preload if name in sys.modules
        }
        local = set(info["local_files"]) | {p for p in worker if not self._is_installed(p)}
        return {**info, "spare": True, "cuda_device": device, "worker": bool(worker),
                "files": len(self.files), "local_files": sorted(local),
                "seconds": round(time.monotonic() - self.t0, 3)}

    def serve_one(self) -> None:
        """Spare mode: wait for one stage and become it."""
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.ctl, MAX_MESSAGE, 4)
            except OSError:
                data, fds = b"", []
            try:
                req = json.loads(data) if data else {}
            except ValueError:
                req = {}
            if not data or req.get("op") != "spawn" or len(fds) != 2:
                for fd in fds:
                    os.close(fd)
                if not data or req.get("op") == "drain":
                    self._exit(0)  # the watcher is gone or needs us no more
                continue
            conn = socket.socket(fileno=fds[0])
            problem = self.stale_reason()
            wanted = req.get("env", {}).get("CUDA_VISIBLE_DEVICES") if isinstance(req.get("env"), dict) else None
            if problem is None and wanted != os.environ.get("CUDA_VISIBLE_DEVICES"):
                problem = ("device", f"this spare is for CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}")
            if problem is None and not os.path.isdir(str(req.get("cwd"))):
                problem = ("cwd", f"{req.get('cwd')} is not a folder")
            if problem is not None:
                os.close(fds[1])
                try:
                    _send(conn, event="refused", reason=problem[0], message=problem[1])
                except OSError:
                    pass
                conn.close()
                self._exit(0)  # a spare that cannot serve is of no further use
            try:
                _send(conn, event="started", pid=os.getpid())
            except OSError:
                self._exit(0)
            self._child(req, conn, fds[1])

    @staticmethod
    def _is_installed(path: str) -> bool:
        """Files of the interpreter and its site-packages (not the user's)."""
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
        if "site-packages" in path or "dist-packages" in path:
            return True
        return any(path.startswith(p + os.sep) for p in prefixes if p)

    def _snapshot(self) -> dict[str, tuple[int, int, int] | None]:
        files: dict[str, tuple[int, int, int] | None] = {}
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if isinstance(path, str) and path not in files and os.path.isabs(path) and os.path.exists(path):
                files[path] = _file_state(path)
        return files

    # -- checks before each fork -----------------------------------------------

    def stale_reason(self) -> tuple[str, str] | None:
        for path, state in self.files.items():
            if _file_state(path) != state:
                return "stale", f"{path} changed since the pool preloaded it"
        for name in sys.modules:
            if name.startswith(CANDIDATE_PREFIX):
                return "polluted", f"candidate module {name} is loaded in the pool"
        for name, attrs in self.attrs.items():
            module = sys.modules.get(name)
            now = {k: id(v) for k, v in vars(module).items()} if module is not None else {}
            if now != attrs:
                changed = sorted(set(now.items()) ^ set(attrs.items()))
                return "polluted", f"{name}.{changed[0][0] if changed else '?'} is not the preloaded object"
        return None

    # -- serving ---------------------------------------------------------------

    def serve(self) -> None:
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # only wakes select
        signal.signal(signal.SIGTERM, lambda *_: self.shutdown())
        self.sel.register(self.ctl, selectors.EVENT_READ, "ctl")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        while True:
            for key, _ in self.sel.select():
                if key.data == "ctl":
                    self._on_control()
                elif key.data == "wake":
                    try:
                        while os.read(self.wake_r, 512):
                            pass
                    except BlockingIOError:
                        pass
                else:
                    self._on_reply_socket(key.data)
            self._reap()
            if self.draining and not self.children:
                self._exit(0)

    def shutdown(self) -> None:
        """The watcher is gone (or asked us to die): no stage outlives it."""
        for pid in list(self.children):
            _killpg(pid)
        deadline = time.monotonic() + 5
        while self.children and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.01)
        self._exit(0)

    def _exit(self, code: int) -> None:
        # No interpreter finalisation: the frozen preloaded objects are not
        # torn down (and extension modules do not complain about it).
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)

    def _on_control(self) -> None:
        try:
            data, fds, _, _ = socket.recv_fds(self.ctl, MAX_MESSAGE, 4)
        except OSError:
            data, fds = b"", []
        if not data:
            for fd in fds:
                os.close(fd)
            self.shutdown()
            return
        try:
            req = json.loads(data)
        except ValueError:
            req = {}
        op = req.get("op")
        if op != "spawn" or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            if op == "drain":
                self.draining = True
            return
        conn = socket.socket(fileno=fds[0])
        log_fd = fds[1]
        try:
            self._spawn(req, conn, log_fd)
        finally:
            os.close(log_fd)

    def _spawn(self, req: dict, conn: socket.socket, log_fd: int) -> None:
        problem = ("draining", "the pool takes no more stages") if self.draining else self.stale_reason()
        if problem is None and not os.path.isdir(str(req.get("cwd"))):
            problem = ("cwd", f"{req.get('cwd')} is not a folder")
        if problem is not None:
            reason, message = problem
            if reason in ("stale", "polluted"):
                self.draining = True
            try:
                _send(conn, event="refused", reason=reason, message=message)
            except OSError:
                pass
            conn.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child, which never returns
            self._child(req, conn, log_fd)
        self.children[pid] = conn
        self.sel.register(conn, selectors.EVENT_READ, pid)
        try:
            _send(conn, event="started", pid=pid)
        except OSError:
            _killpg(pid)

    def _on_reply_socket(self, pid: int) -> None:
        conn = self.children.get(pid)
        if conn is None:
            return
        try:
            data = conn.recv(4096)
        except OSError:
            data = b""
        if not data:
            # The watcher dropped this stage: nothing of it may survive.
            self.sel.unregister(conn)
            _killpg(pid)

    def _reap(self) -> None:
        for pid in list(self.children):
            try:
                if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                    continue  # still running
            except ChildProcessError:
                pass
            # The exited leader still holds its pid, so its process group id
            # cannot have been reused: kill what the stage left behind.
            _killpg(pid)
            try:
                _, status = os.waitpid(pid, 0)
                rc = os.waitstatus_to_exitcode(status)
            except ChildProcessError:
                rc = None
            conn = self.children.pop(pid)
            try:
                self.sel.unregister(conn)
            except (KeyError, ValueError):
                pass
            try:
                _send(conn, event="exit", returncode=rc)
            except OSError:
                pass
            conn.close()

    # -- the child -------------------------------------------------------------

    def _child(self, req: dict, conn: socket.socket, log_fd: int) -> None:
        code = 1
        try:
            if os.getsid(0) != os.getpid():  # a spare was started leading its session
                os.setsid()
            # A candidate in this stage cannot signal the pool or the watcher
            # (a spare confined itself at its start: see main).
            if not self.spare:
                _signal_scope.confine_signals()
            # The pool's descriptors are not the stage's.
            if self.sel is not None:
                self.sel.close()
            for s in [self.ctl, conn, *self.children.values()]:
                s.close()
            signal.set_wakeup_fd(-1)
            for fd in (self.wake_r, self.wake_w):
                if fd >= 0:
                    os.close(fd)
            for sig, handler in self.handlers.items():
                if handler is not None:
                    try:
                        signal.signal(sig, handler)
                    except (OSError, ValueError):
                        pass
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
            os.close(null)
            os.close(log_fd)
            os.chdir(req["cwd"])
            env = {**req["env"], **self.env_set}
            for k in self.env_unset:
                env.pop(k, None)
            os.environ.clear()
            os.environ.update(env)
            cwd = os.getcwd()
            sys.path[:] = list(dict.fromkeys([cwd, *_pythonpath_entries(env), *self.path_tail]))  # no repeats, in order
            importlib.invalidate_caches()
            import linecache

            linecache.clearcache()
            # Generators a fresh interpreter seeds from the OS at import (torch's
            # default generator starts from a fixed seed, as in a fresh process).
            if "random" in sys.modules:
                sys.modules["random"].seed()
            if "numpy.random" in sys.modules:
                sys.modules["numpy.random"].seed()
            argv = list(req["argv"])
            sys.orig_argv = [sys.executable, "-m", "pytest", *argv]
            sys.argv = [sys.executable, *argv]
            code = _run_pytest()
        except SystemExit as e:
            code = _exit_code(e.code)
        except KeyboardInterrupt:
            _excepthook()
            _die_by_sigint()
        except BaseException:  # noqa: BLE001 - report like the interpreter would
            _excepthook()
            code = 1
        _finish(code)


def _run_pytest() -> int:
    """``python -m pytest`` in this process: __main__ is pytest's, argv[0] its file."""
    import runpy

    try:
        runpy.run_module("pytest", run_name="__main__", alter_sys=True)
    except SystemExit as e:
        return _exit_code(e.code)
    return 0


def _exit_code(code: object) -> int:
    """The process exit status ``SystemExit(code)`` gives (like the interpreter)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:  # noqa: BLE001
        pass
    return 1


def _excepthook() -> None:
    try:
        sys.excepthook(*sys.exc_info())
    except BaseException:  # noqa: BLE001
        traceback.print_exc()


def _die_by_sigint() -> None:
    """An uncaught KeyboardInterrupt ends an interpreter by SIGINT."""
    _flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    os._exit(130)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass


def _finish(code: int) -> None:
    """End the stage as interpreter shutdown would: wait for non-daemon
    threads, run atexit callbacks, flush; but skip tearing down the frozen
    preloaded modules."""
    try:
        main = threading.main_thread()
        for t in threading.enumerate():
            if t is not main and not t.daemon and t.is_alive():
                t.join()
        import atexit

        atexit._run_exitfuncs()  # what Py_FinalizeEx runs; there is no public name
    except KeyboardInterrupt:
        _excepthook()
        _die_by_sigint()
    except BaseException:  # noqa: BLE001
        _excepthook()
    _flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> None:
    """Entry point: ``server.py CTL_FD PRELOAD_JSON [SPARE_JSON]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ctl = socket.socket(fileno=int(argv[0]))
    preload = json.loads(argv[1]) if len(argv) > 1 else []
    spare = json.loads(argv[2]) if len(argv) > 2 else None
    pool = Pool(ctl, preload, spare)
    try:
        if pool.spare:
            # The stage's signal domain, entered before the candidate's worker
            # starts so that both are in it: a domain entered later could not
            # signal a worker started before it (to stop it, or its orphans).
            _signal_scope.confine_signals()
        if pool.spare.get("worker"):
            # A fresh interpreter of its own: it preloads while we do.
            pool.worker_spare = importlib.import_module(str(pool.spare["worker"]))
            pool.worker_spare.prestart()
        info = pool.load()
        if pool.spare:
            info = pool.prepare_spare(info, pool.start_ns)
    except BaseException as e:  # noqa: BLE001 - any failure is reported, then the pool exits
        traceback.print_exc()
        module = None
        if isinstance(e, PreloadError):
            reason, message, module = e.reason, str(e), e.module
        else:
            reason, message = "error", f"{type(e).__name__}: {e}"
        try:
            _send(ctl, event="failed", reason=reason, message=message, module=module)
        finally:
            pool._exit(1)
    try:
        _send(ctl, **info)
    except OSError:  # the watcher left while we were preloading
        pool._exit(0)
    if pool.spare:
        pool.serve_one()
    pool.serve()


if __name__ == "__main__":
    main()
