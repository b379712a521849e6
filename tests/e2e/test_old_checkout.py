"""Driving a checkout that predates the override protocol: a tiny fake one
(a pytest suite that knows none of --override, --record, --level,
--preflight-only) in a temp folder, watched from a project of its own.

The first stage says in one line what the checkout lacks and what to do,
and nothing is written into the checkout. Cold stages (no warm pool), a
suite without torch: about a second.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gemswatch.watch.config import load_config
from gemswatch.watch.devices import DeviceInfo
from gemswatch.watch.events import EventBus
from gemswatch.watch.session import Session


def _old_checkout(root: Path) -> Path:
    checkout = root / "OldGems"
    (checkout / "tests").mkdir(parents=True)
    (checkout / "benchmark").mkdir()
    (checkout / "tests" / "test_softmax.py").write_text("def test_softmax():\n    assert True\n")
    (checkout / "benchmark" / "test_softmax_perf.py").write_text("def test_softmax():\n    assert True\n")
    return checkout


def test_a_checkout_without_the_override_protocol_is_named_with_the_fix(tmp_path: Path):
    checkout = _old_checkout(tmp_path)
    mine = tmp_path / "mine"
    (mine / "kernels").mkdir(parents=True)
    (mine / "kernels" / "softmax_fast.py").write_text("def softmax(x, dim=-1):\n    return x\n")
    (mine / "config.yaml").write_text(
        f"project: {checkout}\npython: {sys.executable}\nmodule: old_gems\nwatch: kernels\nwarm: false\n"
        "benchmark: never\ncandidates:\n  softmax_fast.py: {softmax: softmax}\n"
        "operators:\n  softmax:\n    tests: tests/test_softmax.py\n    marker: null\n"
        "    benchmark: benchmark/test_softmax_perf.py::test_softmax\n"
    )
    events: list[dict] = []
    bus = EventBus()
    bus.subscribe(events.append)
    session = Session(load_config(mine / "config.yaml"), DeviceInfo("cpu"), bus, jobs=1, warm=False)
    session.run_all()
    assert session.scheduler.wait_idle(60)
    session.stop()
    first = next(e for e in events if e["event"] == "stage_finished")
    assert (first["stage"], first["status"]) == ("preflight", "error")
    message = first["message"]
    assert "predates gemswatch's override protocol" in message and "does not know --override" in message
    assert "--preflight-only" in message and "\n" not in message
    assert "unrecognized arguments" in first.get("detail", "")  # pytest's own words stay one step away
    assert not (checkout / ".gemswatch").exists()
    assert (mine / ".gemswatch" / "runs").is_dir()


UPSTREAM_CONFTEST = """
import pathlib


def pytest_addoption(parser):
    # upstream FlagGems' own options of these names (tests/ and benchmark/ conftests)
    parser.addoption("--record", default="none", choices=["none", "log"])
    parser.addoption("--level", default="comprehensive", choices=["core", "comprehensive"])
    parser.addoption("--warmup", default=25)
    parser.addoption("--iter", default=100)
    parser.addoption("--query", action="store_true", default=False)
    parser.addoption("--dtypes", action="append", default=None)


def pytest_configure(config):
    pathlib.Path("upstream.txt").write_text(f"{config.getoption('--record')} {config.getoption('--level')}")
"""

pytest_plugins = ["pytester"]


def test_our_plugins_load_into_a_session_whose_conftest_has_upstream_option_names(pytester):
    pytester.makeconftest(UPSTREAM_CONFTEST)
    pytester.makepyfile(test_upstream="def test_one():\n    assert True\n")
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-p", "gemswatch.testing.correctness", "-p", "gemswatch.testing.benchmark.plugin",
        "--record", "log", "--level", "core", "--gemswatch-record", "json", "--output", "ours.json",
    )
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert (pytester.path / "upstream.txt").read_text() == "log core"  # upstream's options are upstream's
    assert (pytester.path / "ours.json").exists()  # and ours are ours
