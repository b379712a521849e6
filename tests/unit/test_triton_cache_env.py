"""Compiled kernels outlive a stage: every stage's environment names a
Triton cache folder of the project's own, unless the user named one; the
candidate's sandboxed worker compiles into caches of candidates' own."""

from __future__ import annotations

from pathlib import Path

from test_watch_config import GOOD, project

from gemswatch.testing.isolation import sandbox
from gemswatch.watch.config import load_config
from gemswatch.watch.stage.plan import base_env


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


def test_the_candidates_worker_compiles_into_caches_of_its_own_in_the_project(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    cfg = load_config(project(tmp_path, GOOD))
    env = base_env(cfg)
    own = sandbox.candidate_caches(env)
    assert Path(own["TRITON_CACHE_DIR"]).parent == cfg.root / ".gemswatch" / "candidate-caches"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    places = sandbox.writable_places(scratch, {**env, **own})
    assert Path(own["TRITON_CACHE_DIR"]) in places and Path(own["GEMSWATCH_TUNE_CACHE"]) in places
    assert Path(env["TRITON_CACHE_DIR"]) not in places  # the judge's: out of the candidate's reach
    # inside the protected project, but not an ancestor of it: allowed
    assert not sandbox._contains(Path(own["TRITON_CACHE_DIR"]), [cfg.project.resolve()])
