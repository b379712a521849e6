"""Behaviour that needs a fresh interpreter: what an import pulls in, what
runs at interpreter exit, process-wide dispatcher registrations."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


@pytest.fixture
def cand(tmp_path):
    """A candidate file outside any package whose name is not importable."""
    path = tmp_path / "candidates" / "softmax-v2.py"
    path.parent.mkdir()
    path.write_text("def my_softmax(x, dim=-1, dtype=None):\n    return ('cand', x)\n")
    return path


def test_global_registry_with_uncalled_candidate_exits_cleanly(cand):
    # Nothing of the registry runs at interpreter exit, not even for an uncalled candidate.
    code = textwrap.dedent(
        f"""
        import types, sys
        sys.modules["tgt"] = types.ModuleType("tgt")
        from gemswatch.override.registry import get_global_registry
        get_global_registry().override_from_file("softmax", {str(cand)!r}, "my_softmax", "tgt")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_an_override_installed_before_enable_is_what_aten_calls():
    # enable() leaves a process-wide registration behind: run it in a child.
    code = textwrap.dedent(
        """
        import torch
        from gemswatch import gems
        from gemswatch.override.registry import DynamicOpOverride

        calls = []

        def my_softmax(input, dim=-1, dtype=None, *rest):
            calls.append(1)
            x = input.double()
            e = (x - x.amax(dim=dim, keepdim=True)).exp()
            return (e / e.sum(dim=dim, keepdim=True)).to(input.dtype)

        x = torch.randn(3, 5, device=gems.device)
        with DynamicOpOverride() as registry:
            registry.override("softmax", my_softmax)
            gems.enable()
            y = torch.softmax(x, dim=-1)
        assert calls, "enable() did not register the override"
        torch.testing.assert_close(y, torch.exp(x.double()).div(torch.exp(x.double()).sum(-1, keepdim=True)).float())
        print("OK")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]


def test_find_kernel_source_does_not_import_gems():
    code = textwrap.dedent(
        """
        import sys
        from gemswatch.watch.scaffold import find_kernel_source
        path, pkg = find_kernel_source("rms_norm")
        print(path.name, pkg, any(m.startswith(("torch", "gemswatch.gems")) for m in sys.modules))
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["norm.py", "gemswatch.gems.ops", "False"]


def test_cli_module_has_no_side_effects_on_import():
    # Importing the CLI helpers must not import the operator library (cheap for argparse tools).
    code = "import sys, gemswatch.cli_override; print('gemswatch.gems' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert out.split() == ["False", "False"]


def test_importing_every_watcher_module_loads_no_heavy_module():
    code = textwrap.dedent(
        """
        import importlib, pkgutil, sys
        import gemswatch.watch
        for m in pkgutil.walk_packages(gemswatch.watch.__path__, "gemswatch.watch."):
            if not m.name.endswith("__main__"):
                importlib.import_module(m.name)
        heavy = ("torch", "triton", "numpy", "pytest", "_pytest")
        print(sorted(m for m in sys.modules if m.split(".")[0] in heavy
                     or m.startswith(("gemswatch.gems", "gemswatch.testing", "gemswatch.override"))))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[]"]
