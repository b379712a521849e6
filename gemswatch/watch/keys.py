"""Single key presses from a terminal, without echo, delivered to a callback.

A pager or editor can borrow the terminal: :meth:`KeyReader.paused` stops
reading and puts the terminal's own mode back until it is done.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
from typing import Callable, Iterator

__all__ = ["KeyReader", "decode_keys"]

# Escape sequences of the keys gemswatch binds (xterm and VT forms).
_SEQUENCES = {
    "\x1b[A": "up", "\x1b[B": "down", "\x1bOA": "up", "\x1bOB": "down",
    "\x1b[5~": "pgup", "\x1b[6~": "pgdn",
}
_SINGLE = {"\x03": "ctrl-c", "\r": "enter", "\n": "enter"}


def decode_keys(data: str) -> list[str]:
    """Split raw terminal input into key names ('r', 'up', 'pgdn', 'enter',
    'esc', ...); an escape sequence gemswatch does not bind is skipped whole."""
    out = []
    i = 0
    while i < len(data):
        for seq, name in _SEQUENCES.items():
            if data.startswith(seq, i):
                out.append(name)
                i += len(seq)
                break
        else:
            ch = data[i]
            i += 1
            if ch == "\x1b":
                if i >= len(data) or data[i] not in "[O":
                    out.append("esc")  # a lone Esc (a sequence arrives in one read)
                    continue
                # CSI/SS3: parameters and intermediates, then one final byte (@ to ~)
                i += 1
                while i < len(data) and not ("@" <= data[i] <= "~"):
                    i += 1
                i += 1
                continue
            out.append(_SINGLE.get(ch, ch))
    return out


class KeyReader:
    """Read keys from a tty in cbreak mode on a thread; restore it on stop."""

    def __init__(self, on_key: Callable[[str], None], stream=None):
        self.on_key = on_key
        self.stream = stream or sys.stdin
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._saved = None
        self._reading = threading.Lock()  # held while the loop reads; paused() takes it

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
            with self._reading:
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

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Stop reading keys and give the terminal its own mode back for the
        duration (a pager reads the keys then); cbreak mode again after."""
        with self._reading:
            self._set_mode(self._saved)
            try:
                yield
            finally:
                if self._saved is not None and not self._stop.is_set():
                    try:
                        import tty

                        tty.setcbreak(self.stream.fileno())
                    except (OSError, ValueError):
                        pass

    def _set_mode(self, mode) -> None:
        if mode is None:
            return
        import termios

        try:
            termios.tcsetattr(self.stream.fileno(), termios.TCSADRAIN, mode)
        except (OSError, ValueError):
            pass

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)
        self._set_mode(self._saved)
