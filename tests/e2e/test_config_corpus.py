"""The bad-configuration corpus (tests/config_corpus/): every broken
config.yaml through the validator, through `gemswatch run`, and into a live
watcher that must keep its last good config.

The project is the torch-free one of test_watch_e2e.py, so a stage costs
about one interpreter start. Every wait has an explicit bound.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_watch_e2e import Watcher, events, gemswatch, proj, sha, stray_processes  # noqa: F401  (proj: fixture)

from gemswatch.watch.config import ConfigError, load_config

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "config_corpus"
MANIFEST = yaml.safe_load((CORPUS / "manifest.yaml").read_text())
CONFIGS: dict[str, dict] = MANIFEST["configs"]
GOOD = (CORPUS / MANIFEST["good"]).read_text()
REQUIRED_KINDS = {
    "yaml syntax error",
    "unknown key",
    "wrong type",
    "empty file",
    "operator without tests",
    "glob matching nothing",
    "path outside the project",
    "duplicate mapping of one file",
    "unknown benchmark policy",
    "negative timeout",
}


def expected(name: str, project: Path) -> str:
    root = project.resolve()
    return CONFIGS[name]["error"].replace("{project}", str(root)).replace("{project_parent}", str(root.parent))


@pytest.fixture
def project(proj: Path) -> Path:
    """The e2e project with the corpus's good config."""
    (proj / "config.yaml").write_text(GOOD)
    return proj


def test_corpus_covers_the_required_cases():
    files = {p.name for p in CORPUS.glob("*.yaml")} - {"manifest.yaml", MANIFEST["good"]}
    assert files == set(CONFIGS)
    assert len(files) >= 10
    assert {e["kind"] for e in CONFIGS.values() if "kind" in e} == REQUIRED_KINDS
    assert (CORPUS / "empty.yaml").read_bytes() == b""


def test_the_good_config_loads(project):
    cfg = load_config(project / "config.yaml")
    assert [r.pattern for r in cfg.candidates] == ["good.py"] and not cfg.warnings


@pytest.mark.parametrize("name", list(CONFIGS))
def test_validator_gives_one_line_with_key_line_and_fix(project, name):
    (project / "config.yaml").write_text((CORPUS / name).read_text())
    with pytest.raises(ConfigError) as e:
        load_config(project / "config.yaml")
    (issue,) = e.value.issues
    entry = CONFIGS[name]
    assert (issue.key, issue.line) == (entry["key"], entry["line"])
    assert issue.fix and issue.problem
    assert str(issue) == expected(name, project)


def test_gemswatch_run_exits_2_with_that_line(project):
    """All files in one test: one `gemswatch run --json` each (about 0.3 s)."""
    cfg = project / "config.yaml"
    wrong = []
    for name in CONFIGS:
        cfg.write_text((CORPUS / name).read_text())
        r = gemswatch(project, "run", "--json", timeout=30)
        evs = events(r.stdout)
        got = (r.returncode, r.stderr.splitlines(), [e["event"] for e in evs])
        want = (2, [expected(name, project)], ["config_error"])
        if got != want:
            wrong.append(f"{name}: {got} != {want}")
        elif evs[0]["kept_last_good"] or evs[0]["errors_text"] != want[1]:
            wrong.append(f"{name}: {evs[0]}")
    assert wrong == []
    assert not (project / ".gemswatch" / "runs").exists()


def test_watcher_keeps_the_last_good_config(project):
    cfg = project / "config.yaml"
    good = project / "cands" / "good.py"
    original = good.read_text()
    w = Watcher(project)
    try:
        w.wait(lambda e: e["event"] == "watch_started", 15, "watch_started")
        assert w.run_finished("cands/good.py", sha(good))["status"] == "passed"
        for i, name in enumerate(CONFIGS):
            cfg.write_text((CORPUS / name).read_text())
            ev = w.wait(
                lambda e, n=i + 1: e["event"] == "config_error"
                and len([x for x in w.events if x["event"] == "config_error"]) >= n,
                10,
                f"config_error for {name}",
            )
            assert [x for x in w.events if x["event"] == "config_error"][i] is ev, f"{name}: more than one config_error"
            assert ev["kept_last_good"] is True
            assert ev["errors_text"] == [expected(name, project)], name
            assert (ev["errors"][0]["key"], ev["errors"][0]["line"]) == (CONFIGS[name]["key"], CONFIGS[name]["line"])
            # Still watching on the last good config: a save is queued with its pipeline.
            good.write_text(original + f"\n# saved under {name}\n")
            queued = w.wait(
                lambda e, s=sha(good): e["event"] == "run_queued" and e["content_sha256"] == s, 10, f"a save under {name}"
            )
            assert (queued["candidate"], queued["functions"]) == ("cands/good.py", {"softmax": "my_softmax"})
        # ... and it runs to its verdict (the earlier saves were superseded on the way).
        assert w.run_finished("cands/good.py", sha(good), timeout=30)["status"] == "passed"
        # A good edit applies: the newly mapped file runs.
        cfg.write_text(GOOD.replace("  good.py: {softmax: my_softmax}\n", "  good.py: {softmax: my_softmax}\n  wrong.py: {softmax: my_softmax}\n"))
        wrong = w.run_finished("cands/wrong.py", sha(project / "cands" / "wrong.py"))
        assert wrong["status"] == "failed"
        queued = [e for e in w.events if e["event"] == "run_queued" and e["candidate"] == "cands/wrong.py"]
        assert [e["reason"] for e in queued] == ["config changed"]
        n_errors = len([e for e in w.events if e["event"] == "config_error"])
    finally:
        rc = w.stop()
    assert rc == 0, w.stderr
    assert n_errors == len(CONFIGS)
    assert "config.yaml reloaded" in w.stderr
    assert w.events[-1]["event"] == "watch_stopped"
    assert not stray_processes(project)
