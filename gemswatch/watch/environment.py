"""What a result was measured with: the tags every history line carries.

``env`` on a ``stage_finished`` or ``run_finished`` line::

    {"commit": "<sha>", "dirty": false, "torch": "2.13.0+cpu", "triton": "3.9.0",
     "driver": "580.65.06", "device": "NVIDIA H200"}

- ``commit`` / ``dirty``: the project's git HEAD, and whether a tracked file
  outside the watched folder differs from it (candidates are edited all the
  time; the library, tests and benchmarks they are judged by are what
  makes two results comparable). null outside a git checkout.
- ``torch`` / ``triton``: the versions installed in the stages' interpreter
  (``python:`` of config.yaml), read from its package metadata without
  importing either (the watcher never imports torch).
- ``driver`` / ``device``: the first visible GPU's name and driver version
  from ``nvidia-smi``; ``cpu`` and null without a GPU.

The *environment* of a row is (torch, triton, driver, device); commit and
dirty say where the code stood but are not the environment: comparing
commits is what a history is for. :func:`same_environment` compares two.

Imports the standard library only (subprocess for the interpreter and
nvidia-smi; git through :mod:`.git_state`); never torch, triton or pytest.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .git_state import GitRunner, GitStateCache, git_output, git_state

__all__ = ["ENVIRONMENT_KEYS", "EnvironmentTags", "git_state", "installed_versions", "gpu_identity", "same_environment"]

ENVIRONMENT_KEYS = ("torch", "triton", "driver", "device")
_TIMEOUT_S = 10
_VERSIONS = (
    "import importlib.metadata as m\n"
    "for name in ('torch', 'triton'):\n"
    "    try:\n"
    "        print(m.version(name))\n"
    "    except m.PackageNotFoundError:\n"
    "        print('')\n"
)


def _output(cmd: list[str], cwd: Path | None = None) -> str | None:
    """stdout of ``cmd``, or None when it cannot run or fails."""
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


@functools.lru_cache(maxsize=8)
def installed_versions(python: str) -> tuple[str | None, str | None]:
    """(torch, triton) versions installed for ``python`` (None where absent); cached per interpreter."""
    out = _output([python, "-c", _VERSIONS])
    lines = (out or "").splitlines() + ["", ""]
    return lines[0].strip() or None, lines[1].strip() or None


@functools.lru_cache(maxsize=8)
def gpu_identity(gpu: str | None) -> tuple[str, str | None]:
    """(device name, driver version) of GPU ``gpu`` (an nvidia-smi index), or ("cpu", None)."""
    smi = shutil.which("nvidia-smi") if gpu is not None else None
    out = _output([smi, "-i", gpu, "--query-gpu=name,driver_version", "--format=csv,noheader"]) if smi else None
    if not out or "," not in out:
        return ("cpu", None) if gpu is None else ("cuda", None)
    name, driver = out.splitlines()[0].rsplit(",", 1)
    return name.strip(), driver.strip() or None


def same_environment(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool | None:
    """Whether two ``env`` tags name one environment (None: one is missing)."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return None
    return all(a.get(k) == b.get(k) for k in ENVIRONMENT_KEYS)


@dataclass
class EnvironmentTags:
    """The ``env`` tag of this session's results.

    Versions and the device are read once; the git state is read again
    only when git's files or a tracked file outside the watched folder
    changed (:class:`GitStateCache`), so asking on every finished stage and
    run (under the event bus's lock) costs no subprocess.
    """

    project: Path
    python: str
    gpu: str | None  # the first visible GPU's index, None on the CPU
    watched: Path | None = None
    run_git: GitRunner = git_output
    _git: GitStateCache = field(init=False)

    def __post_init__(self) -> None:
        self._git = GitStateCache(self.project, self.watched, self.run_git)

    def tags(self) -> dict[str, Any]:
        torch_version, triton_version = installed_versions(self.python)
        device, driver = gpu_identity(self.gpu)
        commit, dirty = self._git.state()
        return {"commit": commit, "dirty": dirty, "torch": torch_version, "triton": triton_version,
                "driver": driver, "device": device}
