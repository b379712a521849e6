"""Compiled kernels outlive a stage: every stage's environment names a
Triton cache folder of the project's own, unless the user named one, and
the candidate's sandbox lets its worker write there."""

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


def test_the_sandbox_lets_the_worker_write_to_the_projects_triton_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    cfg = load_config(project(tmp_path, GOOD))
    env = base_env(cfg)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    places = sandbox.writable_places(scratch, env)
    cache = Path(env["TRITON_CACHE_DIR"])
    assert cache in places and cache.is_dir()
    # inside the protected project, but not an ancestor of it: allowed
    assert not sandbox._contains(cache, [cfg.project.resolve()])
