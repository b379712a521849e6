"""Single key presses from a terminal, without echo, delivered to a callback."""

from __future__ import annotations

import os
import select
import sys
import threading
from typing import Callable

__all__ = ["KeyReader", "decode_keys"]

_ARROWS = {"\x1b[A": "up", "\x1b[B": "down", "\x1bOA": "up", "\x1bOB": "down"}


def decode_keys(data: str) -> list[str]:
    """Split raw terminal input into key names ('r', 'up', 'down', ...)."""
    out = []
    i = 0
    while i < len(data):
        for seq, name in _ARROWS.items():
            if data.startswith(seq, i):
                out.append(name)
                i += len(seq)
                break
        else:
            ch = data[i]
            i += 1
            if ch == "\x1b":
                # a lone escape or an unknown sequence: skip the sequence
                while i < len(data) and not data[i].isalpha():
                    i += 1
                i += 1 if i < len(data) else 0
                continue
            if ch == "\x03":
                out.append("ctrl-c")
            else:
                out.append(ch)
    return out


class KeyReader:
    """Read keys from a tty in cbreak mode on a thread; restore it on stop."""

    def __init__(self, on_key: Callable[[str], None], stream=None):
        self.on_key = on_key
        self.stream = stream or sys.stdin
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._saved = None

    def start(self) -> bool:
        try:
            import termios
            import tty

            fd = self.stream.fileno()
            if not os.isatty(fd):
                return False
            self._saved = termios.tcgetattr(fd)
            tty.setcbreak(fd)
        except (ImportError, OSError, ValueError, AttributeError):
            return False
        self._thread = threading.Thread(target=self._loop, name="gemswatch-keys", daemon=True)
        self._thread.start()
        return True

    def _loop(self) -> None:
        fd = self.stream.fileno()
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([fd], [], [], 0.1)
            except (OSError, ValueError):
                return
            if not ready:
                continue
            try:
                data = os.read(fd, 64).decode("utf-8", "replace")
            except OSError:
                return
            if not data:
                return
            for key in decode_keys(data):
                self.on_key(key)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)
        if self._saved is not None:
            import termios

            try:
                termios.tcsetattr(self.stream.fileno(), termios.TCSADRAIN, self._saved)
            except (OSError, ValueError):
                pass
