"""Starts a helper process on its first call and never stops it. The child
stays in the stage's process group; it must not outlive the stage. Its pid
goes to $CORPUS_PIDS so a test can check."""

import os
import subprocess
import sys

import torch

_child = None


def my_softmax(x, dim=-1, dtype=None):
    global _child
    if _child is None:
        _child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        folder = os.environ.get("CORPUS_PIDS")
        if folder:
            with open(os.path.join(folder, f"spawn_child.{os.getpid()}.pid"), "w") as f:
                f.write(str(_child.pid))
    result = torch.softmax(x.to(dtype or x.dtype).double(), dim)
    return torch.empty_like(x, dtype=dtype or x.dtype).copy_(result)
