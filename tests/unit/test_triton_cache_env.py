"""Compiled kernels outlive a stage: every stage's environment names a
Triton cache folder of the project's own, unless the user named one; the
candidate's sandboxed worker compiles into caches of candidates' own."""

from __future__ import annotations

from pathlib import Path

from test_watch_config import GOOD, project

from gemswatch.testing.isolation import sandbox
from gemswatch.watch.config import load_config
from gemswatch.watch.mapping import Candidate
from gemswatch.watch.stage.plan import base_env, stage_env


def test_stages_share_a_triton_cache_in_the_project(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    cfg = load_config(project(tmp_path, GOOD))
    assert base_env(cfg)["TRITON_CACHE_DIR"] == str(cfg.root / ".gemswatch" / "triton-cache")  # config.yaml's folder


def test_the_users_triton_cache_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", "/somewhere/mine")
    cfg = load_config(project(tmp_path, GOOD))
    assert base_env(cfg)["TRITON_CACHE_DIR"] == "/somewhere/mine"
    monkeypatch.delenv("TRITON_CACHE_DIR")
    cfg = load_config(project(tmp_path, GOOD + "env:\n  TRITON_CACHE_DIR: /from/config\n"))
    assert base_env(cfg)["TRITON_CACHE_DIR"] == "/from/config"


def _candidate(cfg, name):
    return Candidate(cfg.project / "candidates" / name, f"candidates/{name}", (("softmax", "my_softmax"),), "*.py")


def test_the_candidates_worker_compiles_into_caches_of_its_own_in_the_project(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    cfg = load_config(project(tmp_path, GOOD))
    env = stage_env(cfg, _candidate(cfg, "softmax_v2.py"), "r1", None)
    own = sandbox.candidate_caches(env)
    assert Path(own["TRITON_CACHE_DIR"]).parent.parent == cfg.root / ".gemswatch" / "candidate-caches"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    places = sandbox.writable_places(scratch, {**env, **own})
    assert Path(own["TRITON_CACHE_DIR"]) in places and Path(own["GEMSWATCH_TUNE_CACHE"]) in places
    assert Path(env["TRITON_CACHE_DIR"]) not in places  # the judge's: out of the candidate's reach
    # inside the protected project, but not an ancestor of it: allowed
    assert not sandbox._contains(Path(own["TRITON_CACHE_DIR"]), [cfg.project.resolve()])


def test_each_candidate_file_has_caches_no_other_candidate_can_write(tmp_path, monkeypatch):
    # A candidate that rewrote torch.compile's cached modules made another
    # file's honest torch.compile candidate wrong when the caches were shared.
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    cfg = load_config(project(tmp_path, GOOD))
    first, again, other = (sandbox.candidate_caches(stage_env(cfg, _candidate(cfg, n), r, None))
                           for n, r in (("a.py", "r1"), ("a.py", "r2"), ("b.py", "r3")))
    assert first == again  # a file's next save finds what its last one compiled
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    places = sandbox.writable_places(scratch, {**stage_env(cfg, _candidate(cfg, "a.py"), "r1", None), **first})
    assert all(not any(Path(p).is_relative_to(q) for q in places)
               for p in other.values())
