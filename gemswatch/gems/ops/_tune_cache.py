"""Tuning choices kept on disk, so a fresh process does not tune again.

One JSON file per (device name, triton version, kernel) under the folder
``$GEMSWATCH_TUNE_CACHE`` (default ``~/.cache/gemswatch/tune``)::

    <folder>/<device name>--triton-<version>/<kernel>.json
    {"schema_version": 1, "device": ..., "triton": ..., "kernel": ...,
     "entries": {"<problem key as JSON>": <choice as JSON>}}

A file is rewritten whole, atomically (a temporary file in the same folder,
then ``os.replace``), after re-reading it so entries another process added
meanwhile are kept. A file that cannot be read or parsed is ignored with one
line on stderr; its kernel is tuned again and the file rewritten. A folder
that cannot be written leaves the choices in memory only (one line too).

Imports only the standard library.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Hashable
from pathlib import Path
from typing import Any

__all__ = ["ENV_VAR", "SCHEMA_VERSION", "TuneCache", "default_folder", "encode"]

ENV_VAR = "GEMSWATCH_TUNE_CACHE"
SCHEMA_VERSION = 1


def default_folder() -> Path:
    """``$GEMSWATCH_TUNE_CACHE``, else ``~/.cache/gemswatch/tune``."""
    configured = os.environ.get(ENV_VAR)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "gemswatch" / "tune"


def encode(value: Hashable) -> str:
    """The canonical JSON text of a key or choice (tuples as lists)."""
    return json.dumps(value, separators=(",", ":"))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "unknown"


def _warn(message: str) -> None:
    print(f"gems tune cache: {message}", file=sys.stderr)


class TuneCache:
    """The tuning files of one device and triton version.

    Args:
        folder: the cache folder (see :func:`default_folder`).
        device: the device's name (``torch.cuda.get_device_name()``): devices
            of other names never share entries.
        triton: the triton version, which compiles the kernels being timed.
    """

    def __init__(self, folder: Path, device: str, triton: str) -> None:
        self.folder = Path(folder)
        self.device = device
        self.triton = triton
        self._entries: dict[str, dict[str, Any]] = {}  # kernel -> entries, read once
        self._warned: set[str] = set()

    def path(self, kernel: str) -> Path:
        return self.folder / f"{_slug(self.device)}--triton-{_slug(self.triton)}" / f"{_slug(kernel)}.json"

    def entries(self, kernel: str) -> dict[str, Any]:
        """The stored choices of ``kernel``: encoded key -> choice (read once)."""
        if kernel not in self._entries:
            self._entries[kernel] = self._read(kernel)
        return self._entries[kernel]

    def put(self, kernel: str, key: str, choice: Any) -> None:
        """Store ``choice`` for ``key`` and rewrite the kernel's file."""
        entries = self._read(kernel, quiet=True)  # what other processes wrote meanwhile
        entries.update(self._entries.get(kernel, {}))
        entries[key] = choice
        self._entries[kernel] = entries
        self._write(kernel, entries)

    def _read(self, kernel: str, quiet: bool = False) -> dict[str, Any]:
        path = self.path(kernel)
        try:
            text = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):  # nothing stored yet
            return {}
        except OSError as e:
            self._warn_once(path, f"cannot read {path} ({e}); tuning again")
            return {}
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
                raise ValueError(f"not a schema_version {SCHEMA_VERSION} tuning file")
            entries = data["entries"]
            if not isinstance(entries, dict):
                raise ValueError("its entries are not a mapping")
        except (ValueError, KeyError) as e:
            if not quiet:
                self._warn_once(path, f"ignoring {path} ({e}); tuning again and rewriting it")
            return {}
        return entries

    def _write(self, kernel: str, entries: dict[str, Any]) -> None:
        path = self.path(kernel)
        document = {
            "schema_version": SCHEMA_VERSION,
            "device": self.device,
            "triton": self.triton,
            "kernel": kernel,
            "entries": entries,
        }
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(document, f, indent=1, sort_keys=True)
                os.replace(temp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
        except OSError as e:
            self._warn_once(path.parent, f"cannot write {path} ({e}); set {ENV_VAR} to a writable folder")

    def _warn_once(self, path: Path, message: str) -> None:
        if str(path) not in self._warned:
            self._warned.add(str(path))
            _warn(message)

