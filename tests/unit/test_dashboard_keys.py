"""Key decoding (page keys, Enter, Esc, unknown sequences skipped whole) and a
key reader that lets a pager have the terminal: on a pseudo-terminal, keys
typed while it is paused are left for the pager. About 0.5 s."""

from __future__ import annotations

import os
import threading
import time

import pytest

from gemswatch.watch.keys import KeyReader, decode_keys


def test_decode_the_bound_keys():
    assert decode_keys("\x1b[5~\x1b[6~") == ["pgup", "pgdn"]
    assert decode_keys("\r\n? ") == ["enter", "enter", "?", " "]
    assert decode_keys("\x1b") == ["esc"]
    assert decode_keys("o\x03") == ["o", "ctrl-c"]


def test_an_unknown_sequence_is_skipped_without_eating_the_next_key():
    assert decode_keys("\x1b[3~x") == ["x"]  # Delete, then x
    assert decode_keys("\x1b[1;5Cf") == ["f"]
    assert decode_keys("\x1bOPq") == ["q"]  # F1


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_a_paused_reader_leaves_the_keys_to_the_pager_and_reads_again_after():
    import termios

    master, slave = os.openpty()
    got: list[str] = []
    seen = threading.Event()

    def on_key(key: str) -> None:
        got.append(key)
        seen.set()

    stream = os.fdopen(slave, "rb", buffering=0)
    reader = KeyReader(on_key, stream=stream)
    try:
        cooked = termios.tcgetattr(slave)
        assert reader.start()
        assert not termios.tcgetattr(slave)[3] & termios.ICANON  # cbreak while reading
        os.write(master, b"j")
        assert seen.wait(2) and got == ["j"]
        with reader.paused():
            assert termios.tcgetattr(slave)[3] == cooked[3]  # the terminal's own mode for the pager
            os.write(master, b"q\n")
            time.sleep(0.3)  # the reader would have taken it by now
            assert got == ["j"]
            assert os.read(slave, 16) == b"q\n"  # the pager reads it
        assert not termios.tcgetattr(slave)[3] & termios.ICANON
        seen.clear()
        os.write(master, b"k")
        assert seen.wait(2) and got == ["j", "k"]
    finally:
        reader.stop()
        stream.close()
        os.close(master)
