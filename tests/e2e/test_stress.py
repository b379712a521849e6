"""The short version of scripts/stress.py: 40 saves over 4 files in about
10 s against a live watcher, then ``kill -9`` of the watcher while cold and
while warm stages run. Explicit time bounds, a fixed seed, no retries."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "stress.py"


def load_stress():
    spec = importlib.util.spec_from_file_location("gemswatch_stress_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_saves_storm_and_kill_9(tmp_path):
    stress = load_stress()
    start = time.monotonic()
    fig = stress.run_stress(tmp_path, saves=40, files=4, seconds=10.0, seed=3, jobs=2)
    text = stress.report(fig)
    print(text)
    s = fig["storm"]
    assert s["saves"] == 40 and s["save_s"] < 12, text
    assert s["settled"], text
    # every file's last verdict is about its final bytes, and passed
    assert s["mismatches"] == [], text
    # never two stages of one file at once (event stream and processes)
    assert s["overlaps"] == [], text
    assert s["runs_started"] >= 4 and s["superseded"] > 0 and s["other"] == [], text
    for kill in fig["kill"]:
        assert kill["running"], text
        assert kill["survivors"] == [], text
    assert fig["history_lines"] > 0 and fig["history_bad"] == [], text
    assert fig["ok"], text
    assert time.monotonic() - start < 120, text
