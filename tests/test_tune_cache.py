"""Tuning choices persist on disk (gemswatch.gems.ops._tune_cache, _tune.Tuner).

A fake timer stands in for the CUDA one: it counts the candidates it is
asked to time and ranks them by the order it sees them, so the tests check
what is timed and what is read back, not any speed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gemswatch import gems
from gemswatch.gems.ops import _tune, _tune_cache
from gemswatch.gems.ops import mm as mm_module

CACHE_MODULE = Path(_tune_cache.__file__)
OPTIONS = [(64, 64), (128, 64), (128, 128)]


class CountingTimer:
    """Times nothing: the n-th candidate asked about takes ``first_ms - n``
    ms, so the last one wins; ``trials`` counts the candidates."""

    def __init__(self, first_ms: float = 100.0) -> None:
        self.first_ms = first_ms
        self.trials = 0

    def __call__(self, call) -> float:
        self.trials += 1
        return self.first_ms - self.trials


def choose(tuner: _tune.Tuner, device: str = "NVIDIA H200", key=(1024, 1024, 1024, "float32")):
    return tuner.choose("addmm", device, key, OPTIONS, lambda option: lambda: None)


def test_the_first_choice_is_timed_and_a_fresh_tuner_reads_it_back(tmp_path):
    first = CountingTimer()
    assert choose(_tune.Tuner(tmp_path, first, "3.6.0")) == (128, 128)
    assert first.trials == len(OPTIONS)

    again = CountingTimer()
    assert choose(_tune.Tuner(tmp_path, again, "3.6.0")) == (128, 128)
    assert again.trials == 0


def test_a_second_process_reads_the_choice_without_timing(tmp_path):
    choose(_tune.Tuner(tmp_path, CountingTimer(), "3.6.0"))
    # The child loads the cache module alone (standard library only), so it
    # starts in a few tens of milliseconds rather than importing torch.
    child = f"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("tune_cache", {str(CACHE_MODULE)!r})
cache = importlib.util.module_from_spec(spec); spec.loader.exec_module(cache)
found = cache.TuneCache({str(tmp_path)!r}, "NVIDIA H200", "3.6.0").entries("addmm")
print(json.dumps(found))
"""
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == {_tune_cache.encode([1024, 1024, 1024, "float32"]): [128, 128]}
    assert out.stderr == ""


def test_a_corrupt_file_is_ignored_with_one_line_and_rewritten(tmp_path, capsys):
    tuner = _tune.Tuner(tmp_path, CountingTimer(), "3.6.0")
    path = tuner.cache("NVIDIA H200").path("addmm")
    path.parent.mkdir(parents=True)
    path.write_text('{"schema_version": 1, "entries": {"[1024', encoding="utf-8")  # torn write

    assert choose(tuner) == (128, 128)
    assert tuner.timer.trials == len(OPTIONS)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "tuning again" in lines[0]
    assert json.loads(path.read_text(encoding="utf-8"))["entries"] == {
        _tune_cache.encode([1024, 1024, 1024, "float32"]): [128, 128]
    }


def test_a_file_of_another_schema_is_ignored(tmp_path, capsys):
    tuner = _tune.Tuner(tmp_path, CountingTimer(), "3.6.0")
    path = tuner.cache("NVIDIA H200").path("addmm")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema_version": 99, "entries": {}}), encoding="utf-8")
    choose(tuner)
    assert tuner.timer.trials == len(OPTIONS)
    assert "schema_version 1" in capsys.readouterr().err


def test_devices_of_other_names_and_other_triton_versions_do_not_share_entries(tmp_path):
    choose(_tune.Tuner(tmp_path, CountingTimer(), "3.6.0"), device="NVIDIA H200")
    for device, version in [("NVIDIA A100-SXM4-80GB", "3.6.0"), ("NVIDIA H200", "3.7.0")]:
        timer = CountingTimer()
        choose(_tune.Tuner(tmp_path, timer, version), device=device)
        assert timer.trials == len(OPTIONS), (device, version)
    assert len(list(tmp_path.glob("*/addmm.json"))) == 3


def test_a_stored_choice_no_longer_among_the_options_is_timed_again(tmp_path):
    choose(_tune.Tuner(tmp_path, CountingTimer(), "3.6.0"))
    timer = CountingTimer()
    tuner = _tune.Tuner(tmp_path, timer, "3.6.0")
    assert tuner.choose("addmm", "NVIDIA H200", (1024, 1024, 1024, "float32"), OPTIONS[:2], lambda o: lambda: None) == (
        128,
        64,
    )
    assert timer.trials == 2


def test_entries_written_by_another_process_meanwhile_are_kept(tmp_path):
    ours = _tune.Tuner(tmp_path, CountingTimer(), "3.6.0")
    choose(ours, key=(1, 2, 3, "float16"))
    theirs = _tune.Tuner(tmp_path, CountingTimer(), "3.6.0")
    choose(theirs, key=(4, 5, 6, "float16"))
    choose(ours, key=(7, 8, 9, "float16"))  # ours had read the file before theirs wrote
    stored = json.loads(ours.cache("NVIDIA H200").path("addmm").read_text(encoding="utf-8"))["entries"]
    assert len(stored) == 3


def test_an_unwritable_folder_keeps_the_choice_in_memory(tmp_path, capsys):
    folder = tmp_path / "a_file"
    folder.write_text("not a folder", encoding="utf-8")
    tuner = _tune.Tuner(folder, CountingTimer(), "3.6.0")
    assert choose(tuner) == (128, 128)
    assert choose(tuner) == (128, 128)
    assert tuner.timer.trials == len(OPTIONS)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and _tune_cache.ENV_VAR in err[0]


def test_the_folder_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(_tune_cache.ENV_VAR, str(tmp_path / "tune"))
    assert _tune_cache.default_folder() == tmp_path / "tune"
    monkeypatch.delenv(_tune_cache.ENV_VAR)
    assert _tune_cache.default_folder() == Path.home() / ".cache" / "gemswatch" / "tune"


# -- the matrix products' choices go through the tuner ---------------------------


@pytest.fixture
def tuned_mm(monkeypatch, tmp_path):
    """mm as on a GPU (tuned above a tiny size, exact fp32 dots) under the
    interpreter, with a fresh tuner on ``tmp_path`` and empty memos; small
    tiles, which the interpreter runs quickly."""
    monkeypatch.setattr(mm_module, "interpreted", False)
    monkeypatch.setattr(mm_module, "_TILES", [(32, 32, 32, 1, 1), (16, 16, 16, 1, 1)])
    monkeypatch.setattr(mm_module, "_SPLIT_TILES", {4: [(16, 16, 16, 1, 1)]})
    monkeypatch.setattr(mm_module, "AUTOTUNE_MIN_FLOPS", 1)
    monkeypatch.setattr(mm_module, "_tiles", {})
    monkeypatch.setattr(mm_module, "_split_plans", {})
    monkeypatch.setattr(mm_module, "_plans", {})

    def fresh_process() -> CountingTimer:
        timer = CountingTimer()
        monkeypatch.setattr(_tune, "_tuner", _tune.Tuner(tmp_path, timer))
        mm_module._tiles.clear()
        mm_module._split_plans.clear()
        mm_module._plans.clear()
        return timer

    return fresh_process


@pytest.mark.skipif(gems.device != "cpu", reason="forces the tuned path under the interpreter")
def test_mm_tile_and_split_choices_persist_across_processes(tuned_mm, tmp_path):
    gen = torch.Generator().manual_seed(3)
    # 16x16x16 has no split candidate (the tile is tuned); 16x16x128 has
    # two (2 and 4 splits), and the fake timer prefers the last.
    cases = [(16, 16, 16), (16, 16, 128)]
    operands = [(torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen)) for m, n, k in cases]

    first = tuned_mm()
    for a, b in operands:
        assert torch.allclose(gems.mm(a, b), a @ b, rtol=1e-5, atol=1e-5)
    assert first.trials == len(mm_module._TILES) + 3
    assert mm_module._split_plans[mm_module._split_key(*operands[1], False)] == ((16, 16, 16, 1, 1), 4)
    assert mm_module._tiles[(16, 16, 16, "float32", "ieee", False, True, True)] == (16, 16, 16, 1, 1)
    files = sorted(p.name for p in tmp_path.glob("*/*.json"))
    tag = mm_module._kernels_tag()  # an edited kernel gets files of its own
    assert files == [f"addmm-{tag}.json", f"addmm_split_k-{tag}.json"]

    again = tuned_mm()
    for a, b in operands:
        assert torch.allclose(gems.mm(a, b), a @ b, rtol=1e-5, atol=1e-5)
    assert again.trials == 0
