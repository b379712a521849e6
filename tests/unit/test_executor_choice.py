"""Choosing where stages run (--executor, executor:, ray_address:) without a
cluster: what a user without Ray sees, the config keys, and the slots the
scheduler gets for a Ray cluster. No Ray needed; no stage runs."""

from __future__ import annotations

import sys

import pytest

from gemswatch.watch.cli import main
from gemswatch.watch.config import ConfigError, load_config
from gemswatch.watch.devices import DeviceInfo
from gemswatch.watch.events import EventBus
from gemswatch.watch.session import Session
from gemswatch.watch.stage import StageResult
from gemswatch.watch.status import PASSED, STAGES
from _fake_stages import FunctionStages

CONFIG = """\
watch: cands
benchmark: never
candidates:
  softmax_v2.py:
    softmax: my_softmax
operators:
  softmax:
    tests: tests/test_softmax.py
"""


@pytest.fixture
def proj(tmp_path, monkeypatch):
    (tmp_path / "cands").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_softmax.py").write_text("")
    (tmp_path / "cands" / "softmax_v2.py").write_text("def my_softmax(x):\n    return x\n")
    (tmp_path / "config.yaml").write_text(CONFIG)
    monkeypatch.chdir(tmp_path)
    # main() makes its process the subreaper of what stages abandon: not the test process's job.
    monkeypatch.setattr("gemswatch.watch.cli.care.adopt_orphans", lambda: False)
    return tmp_path


@pytest.fixture
def no_ray(monkeypatch):
    """Ray as if it were not installed: ``import ray`` fails."""
    monkeypatch.setitem(sys.modules, "ray", None)


def test_executor_ray_without_ray_exits_2_with_how_to_install(proj, no_ray, capsys):
    assert main(["run", "--executor", "ray"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("gemswatch: --executor ray: ")
    assert 'pip install "gemswatch[ray]"' in err[0]


def test_config_executor_ray_without_ray_names_the_config(proj, no_ray, capsys):
    (proj / "config.yaml").write_text(CONFIG + "executor: ray\n")
    assert main(["run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gemswatch: executor: ray in config.yaml: "), err
    assert 'pip install "gemswatch[ray]"' in err[0]


def test_a_ray_address_without_the_ray_executor_is_a_usage_error(proj, capsys):
    assert main(["run", "--ray-address", "auto"]) == 2
    assert "--ray-address is for --executor ray" in capsys.readouterr().err


def test_config_keys_executor_and_ray_address(proj):
    (proj / "config.yaml").write_text(CONFIG + "executor: ray\nray_address: 10.0.0.5:6379\n")
    cfg = load_config(proj / "config.yaml")
    assert (cfg.executor, cfg.ray_address) == ("ray", "10.0.0.5:6379")
    (proj / "config.yaml").write_text(CONFIG)
    cfg = load_config(proj / "config.yaml")
    assert (cfg.executor, cfg.ray_address) == ("local", None)


@pytest.mark.parametrize("line, problem", [
    ("executor: cluster", "executor: unknown executor 'cluster'; use local or ray"),
    ("ray_address: ''", "ray_address: empty address"),
])
def test_bad_executor_keys_name_the_line_and_the_fix(proj, line, problem):
    (proj / "config.yaml").write_text(CONFIG + line + "\n")
    with pytest.raises(ConfigError) as e:
        load_config(proj / "config.yaml")
    assert problem in str(e.value)
    assert f"config.yaml:{CONFIG.count(chr(10)) + 1}:" in str(e.value)


def test_ray_gpu_slots_are_held_whole_by_every_stage(proj):
    # A Ray GPU slot is one whole GPU: no stage shares it, not only the benchmark.
    ray_gpus = DeviceInfo("cuda", ("ray:0", "ray:1"), exclusive=True, label="ray cluster")
    s = Session(load_config(proj / "config.yaml"), ray_gpus, EventBus(), stages=FunctionStages(lambda r, st, d: StageResult(st, PASSED)))
    assert s.scheduler.exclusive_stages == frozenset(STAGES)
    assert (s.jobs, s.scheduler.devices) == (2, ["ray:0", "ray:1"])
    local = Session(load_config(proj / "config.yaml"), DeviceInfo("cuda", ("0", "1")), EventBus(),
                    stages=FunctionStages(lambda r, st, d: StageResult(st, PASSED)))
    assert local.scheduler.exclusive_stages == frozenset({"benchmark"})
    s.stop()
    local.stop()


def test_a_cpu_cluster_offers_its_cpu_slots_as_jobs():
    assert DeviceInfo("cpu", cpus=48, label="ray cluster").default_jobs() == 48
    assert DeviceInfo("cpu", cpus=48, label="ray cluster").describe() == "ray cluster"


def test_an_address_nothing_answers_at_fails_at_once():
    from gemswatch.watch.stage.ray.cluster import _answers

    with pytest.raises(ConnectionError, match="nothing answers at 127.0.0.1:1"):
        _answers("127.0.0.1:1", timeout=2)
    _answers("auto")  # Ray resolves `auto` itself


def test_the_watchdog_kills_what_carries_its_entry_once_gemswatch_is_gone(tmp_path):
    # A process of a cluster started here (it carries the entry, in a session
    # of its own) dies when the watchdog's pipe ends; an unmarked one lives.
    import os
    import subprocess

    from gemswatch.watch.stage.ray.watchdog import MARKER_ENV, Watchdog

    dog = Watchdog(f"test-{os.getpid()}")
    session = dog.entry.split("=", 1)[1]
    marked = subprocess.Popen(["sleep", "60"], env={**os.environ, MARKER_ENV: session}, start_new_session=True)
    plain = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        dog.close()
        assert marked.wait(timeout=10) == -9
        assert plain.poll() is None
    finally:
        for p in (marked, plain):
            p.kill()
            p.wait()
