"""Starts a helper that hides from every marker: a new session, a parent
that exits at once (so the helper is re-parented), and an empty
environment. It must not outlive the stage. Its pid goes to $CORPUS_PIDS."""

import os
import subprocess
import sys

import torch

_started = False


def my_softmax(x, dim=-1, dtype=None):
    global _started
    if not _started:
        _started = True
        folder = os.environ.get("CORPUS_PIDS", "")
        note = os.path.join(folder, f"daemonize_no_env.{os.getpid()}.pid") if folder else os.devnull
        # The middle process starts the helper and exits: the helper is an orphan.
        launcher = (
            "import subprocess, sys; "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], env={}, "
            "start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
            f"open({note!r}, 'w').write(str(p.pid))"
        )
        subprocess.run([sys.executable, "-c", launcher], env={}, timeout=60)
    result = torch.softmax(x.to(dtype or x.dtype).double(), dim)
    return torch.empty_like(x, dtype=dtype or x.dtype).copy_(result)
