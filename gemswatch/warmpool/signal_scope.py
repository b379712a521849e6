"""Signals a stage sends stay inside the stage.

A stage runs candidate code, and a candidate can signal any process of its
user: its parent (the warm pool, or the watcher for a stage started cold),
the watcher itself found by walking ``/proc``, or another stage. The
candidate's worker is sandboxed on its own (``GEMSWATCH_CANDIDATE_SANDBOX``),
but that sandbox can be turned off, and a checkout may run candidates in the
stage process. So every stage confines itself first: a Landlock domain that
scopes signals (Linux 6.12, Landlock ABI 6) and restricts no file access.
The stage and everything it starts may still signal one another; the
watcher may still stop them; nothing in the stage can signal a process
outside it. Irreversible, inherited across fork and exec.

Used by the warm pool on each forked stage (loaded by path: the stages'
interpreter may not have gemswatch installed) and, for a stage started cold,
run by path before the stage's own command::

    python -S -E signal_scope.py PROGRAM ARGS...   # confine, then exec PROGRAM

Standard library only.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["confine_signals", "main"]

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on x86_64 and arm64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_SCOPE_SIGNAL = 1 << 1
_ACCESS_FS_REFER = 1 << 13
_PR_SET_NO_NEW_PRIVS = 38


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def confine_signals() -> str | None:
    """Scope this process's signals to itself and its descendants. Returns
    None when done, else why not (an older kernel): never raises."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        abi = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError) as e:
        return f"no Landlock ({e})"
    if abi < 6:
        return "this kernel cannot scope signals (Landlock ABI 6, Linux 6.12)" if abi > 0 else "this kernel has no Landlock"
    # Landlock denies moving a file to another folder (rename, link) unless
    # every layer grants it, even a layer that handles no file access; once
    # the candidate's worker adds its own layer, a compiler's cache write
    # (a file renamed out of a temporary folder) would fail with EXDEV. So
    # this layer grants it everywhere and leaves files to that one.
    attr = _RulesetAttr(_ACCESS_FS_REFER, 0, _SCOPE_SIGNAL)
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        return f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}"
    try:
        root = os.open("/", os.O_PATH | os.O_CLOEXEC)
        try:
            rule = _PathBeneathAttr(_ACCESS_FS_REFER, root)
            if libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule),
                            ctypes.c_uint32(0)) != 0:
                return f"landlock_add_rule failed: {os.strerror(ctypes.get_errno())}"
        finally:
            os.close(root)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"prctl(NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}"
        if libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return None


def main(argv: list[str]) -> None:
    """Confine signals, then become ``argv`` (exit 127 when it cannot run)."""
    confine_signals()  # an older kernel: the stage runs as it would have
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        sys.stderr.write(f"gemswatch: cannot start {argv[0]}: {e.strerror or e}\n")
        sys.exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
