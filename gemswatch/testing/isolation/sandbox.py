"""The candidate worker's sandbox: what the kernel stops it from doing.

The worker process (:mod:`.worker`) drops, before it loads any candidate,
rights that no candidate code can take back (Linux Landlock, unprivileged
and irreversible, inherited by every process the candidate starts):

- **writes** anywhere but a scratch folder of its own (its ``TMPDIR``),
  ``/dev``, its own ``/proc/<pid>``, compiler caches of candidates' own
  (:func:`candidate_caches`: never the ones the judge reads) and the
  folders the stage's environment names in ``GEMSWATCH_CANDIDATE_WRITABLE``: the
  project's tests, benchmarks, conftests and config.yaml, the installed
  judge (gemswatch, torch, pytest) and the stage's reports cannot be
  rewritten, so nothing a candidate does outlives its own calls;
- **ptrace** of any process outside the sandbox, and with it
  ``/proc/<pid>/mem`` of the judge (root included);
- **signals** to processes outside the sandbox (kernel ABI 6 and later):
  the judge, the watcher and the other stages cannot be killed or stopped.

Reads are not restricted (a candidate may read its own helpers, the
library, the tests). Where the kernel has no Landlock, the worker runs
unsandboxed and :func:`restrict` says so; the tamper guard of the watcher
still restores rewritten tests (see docs/integrity.md).

Standard library only (ctypes and the raw system calls).
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CACHES_ENV", "CACHE_VARS", "WRITABLE_ENV", "Sandbox", "candidate_caches", "landlock_abi", "restrict",
           "writable_places"]

# Folders (os.pathsep-separated) a candidate may write besides its own: for
# a candidate that logs or dumps files on purpose.
WRITABLE_ENV = "GEMSWATCH_CANDIDATE_WRITABLE"

# The caches compilers write while a kernel is built (Triton's, CUDA's, the
# generic one, inductor's, the library's tuning choices).
CACHE_VARS = ("TRITON_CACHE_DIR", "CUDA_CACHE_PATH", "XDG_CACHE_HOME", "TORCHINDUCTOR_CACHE_DIR", "GEMSWATCH_TUNE_CACHE")
# Where the candidates' own caches live (the watcher names a folder of the project's).
CACHES_ENV = "GEMSWATCH_CANDIDATE_CACHES"

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on x86_64 and arm64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights that change something (reads and execution stay free).
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
_FILE_RIGHTS = _WRITE_FILE | _TRUNCATE  # the rights a rule on a plain file may hold


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@dataclass(frozen=True)
class Sandbox:
    """What :func:`restrict` achieved, for the stage's log and the report."""

    abi: int  # the kernel's Landlock ABI; 0 without Landlock
    writable: tuple[str, ...]  # where the worker may still write
    signals_scoped: bool
    reason: str = ""  # why there is no sandbox, when there is none

    @property
    def active(self) -> bool:
        return self.abi > 0 and not self.reason

    def describe(self) -> str:
        if not self.active:
            return f"candidate sandbox: off ({self.reason})"
        scope = ", signals to outside processes blocked" if self.signals_scoped else ""
        return f"candidate sandbox: Landlock ABI {self.abi}, writes only to {', '.join(self.writable)}{scope}"


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when it has none (or it is off)."""
    try:
        version = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def candidate_caches(env: dict[str, str]) -> dict[str, str]:
    """The cache folders a sandboxed candidate's worker uses, one per
    :data:`CACHE_VARS` entry, under ``$GEMSWATCH_CANDIDATE_CACHES``.

    A cache the candidate can write must never be one the judge reads: a
    compiled kernel or a tuning choice planted there would run in the judge
    (its gems and torch.compile baselines) or in the judge of a later stage.
    So the worker gets caches of candidates' own; a stage's
    ``$GEMSWATCH_CANDIDATE_CACHES`` is one candidate file's folder
    (``plan.candidate_cache_name``: a kernel unchanged since the file's last
    save is not compiled again, and no other file can plant one there)."""
    base = env.get(CACHES_ENV) or os.path.join(tempfile.gettempdir(), f"gemswatch-candidate-caches-{os.getuid()}")
    return {var: os.path.join(base, var.lower()) for var in CACHE_VARS}


def writable_places(scratch: Path, env: dict[str, str] | None = None) -> list[Path]:
    """Where a candidate may write: its scratch folder, /dev, and the caches
    that compilers write while a kernel is built (created now, as the worker
    could not create them later)."""
    env = dict(os.environ) if env is None else env
    home = Path(env.get("HOME") or Path.home())
    # The CUDA driver writes into its own process's /proc entries when it
    # starts (without them: "cudaGetDeviceCount ... Error 304"); another
    # process's entries stay out of reach (ptrace rules, below).
    places = [scratch, Path("/dev"), Path(f"/proc/{os.getpid()}")]
    defaults = {"TRITON_CACHE_DIR": home / ".triton", "XDG_CACHE_HOME": home / ".cache", "CUDA_CACHE_PATH": home / ".nv"}
    for var, default in ((v, defaults.get(v)) for v in CACHE_VARS):
        value = env.get(var)
        path = Path(value) if value else default
        if path is not None:
            places.append(path)
    for p in places[3:]:
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass
    # The stage's own setting (config.yaml's env:), read before any candidate
    # runs; files or folders that exist now.
    places += [Path(p) for p in env.get(WRITABLE_ENV, "").split(os.pathsep) if p]
    found = []
    for p in places:
        if p.exists() and p not in found:
            found.append(p)
    return found


def _contains(place: Path, protected: list[Path]) -> bool:
    place = place.resolve()
    return any(p == place or p.is_relative_to(place) for p in protected)


def restrict(protected: list[Path], scratch: Path | None = None) -> Sandbox:
    """Sandbox this process (see the module's docstring). ``protected``:
    trees no allowed place may contain (the project); a cache folder that
    is an ancestor of one is left out. Sets ``TMPDIR`` to the scratch folder.
    Never raises: a kernel without Landlock gives an inactive Sandbox."""
    abi = landlock_abi()
    if abi <= 0:
        return Sandbox(0, (), False, "this kernel has no Landlock")
    os.environ.update(candidate_caches(dict(os.environ)))
    scratch = scratch or Path(tempfile.mkdtemp(prefix="gemswatch-candidate-"))
    os.environ["TMPDIR"] = str(scratch)
    tempfile.tempdir = None  # tempfile reads TMPDIR again
    guarded = [p.resolve() for p in protected]
    places = [p for p in writable_places(scratch) if not _contains(p, guarded)]
    dir_rights = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE
    if abi >= 2:
        dir_rights |= _REFER
    if abi >= 3:
        dir_rights |= _TRUNCATE
    attr = _RulesetAttr(dir_rights, 0, (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0)
    libc = _libc()
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 16  # older kernels reject the scope field
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return Sandbox(abi, (), False, f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}")
    try:
        allowed = []
        for place in places:
            try:
                fd = os.open(place, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rights = dir_rights if place.is_dir() else dir_rights & _FILE_RIGHTS
                rule = _PathBeneathAttr(rights, fd)
                if libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                                ctypes.byref(rule), ctypes.c_uint32(0)) == 0:
                    allowed.append(str(place))
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return Sandbox(abi, (), False, f"prctl(NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")
        if libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return Sandbox(abi, (), False, f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return Sandbox(abi, tuple(allowed), abi >= 6)
