"""The files a stage is judged by: kept before it, put back after it
(gemswatch.watch.stage.tamper). Plain files in a temporary folder."""

from __future__ import annotations

from pathlib import Path

from gemswatch.watch.stage.tamper import ProjectGuard


def project(tmp_path: Path) -> tuple[Path, Path, Path]:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_softmax.py").write_text("def test_it():\n    assert softmax_is_right()\n")
    (tests / "conftest.py").write_text("pytest_plugins = ['gemswatch.testing.correctness', 'gemswatch.testing.upstream_spellings']\n")
    return tmp_path, tests / "test_softmax.py", tests / "conftest.py"


def test_a_stage_that_changes_nothing_is_clean(tmp_path):
    root, test, conftest = project(tmp_path)
    guard = ProjectGuard()
    kept = guard.keep([test, conftest])
    test.write_text(test.read_text())  # rewritten with identical bytes: no change
    assert guard.check(kept, root / "kept", root) == []
    guard.release(kept)


def test_a_changed_file_is_put_back_and_its_new_version_kept(tmp_path):
    root, test, conftest = project(tmp_path)
    original = test.read_bytes()
    guard = ProjectGuard()
    kept = guard.keep([test, conftest])
    test.write_text("def test_it():\n    pass\n")
    conftest.unlink()
    found = guard.check(kept, root / "kept", root)
    guard.release(kept)
    assert sorted(t.path for t in found) == [conftest.resolve(), test.resolve()]
    assert test.read_bytes() == original and conftest.exists()
    moved = {t.path.name: t.kept_at for t in found}
    assert moved["conftest.py"] is None  # it was deleted: nothing to keep
    assert moved["test_softmax.py"] == root / "kept" / "tests" / "test_softmax.py"
    assert moved["test_softmax.py"].read_text() == "def test_it():\n    pass\n"
    line = next(t for t in found if t.path.name == "test_softmax.py").describe(lambda p: p.relative_to(root).as_posix(), "correctness")
    assert line == (
        "tests/test_softmax.py changed while the correctness stage ran: it was restored from the copy taken before "
        "the stage; the changed file is kept at kept/tests/test_softmax.py. A candidate may not edit the files that judge it"
    )


def test_a_file_created_where_there_was_none_is_removed(tmp_path):
    root, test, _ = project(tmp_path)
    extra = test.parent / "conftest_extra.py"
    guard = ProjectGuard()
    kept = guard.keep([test, extra])
    extra.write_text("import os\n")
    (found,) = guard.check(kept, root / "kept", root)
    assert found.path == extra.resolve() and not extra.exists()


def test_a_guarded_file_is_no_reason_to_rerun_and_neither_is_its_restoration(tmp_path):
    root, test, conftest = project(tmp_path)
    guard = ProjectGuard()
    assert not guard.ignores(test)  # never kept: a change is a change
    kept = guard.keep([test])
    test.write_text("tampered\n")
    assert guard.ignores(test)  # a running stage guards it: its end decides
    guard.check(kept, root / "kept", root)
    guard.release(kept)
    assert guard.ignores(test)  # restored: the bytes last kept
    test.write_text("the user's new test\n")
    assert not guard.ignores(test)


def test_every_stage_that_kept_a_file_beside_the_change_is_told(tmp_path):
    root, test, conftest = project(tmp_path)
    original = test.read_bytes()
    guard = ProjectGuard()
    a = guard.keep([test, conftest])
    b = guard.keep([test])
    other = guard.keep([conftest])  # not judged by the changed file
    test.write_text("tampered\n")
    late = guard.keep([test])  # starts after the change, while A and B run
    found_a = guard.check(a, root / "kept-a", root)
    assert [t.path.name for t in found_a] == ["test_softmax.py"] and not found_a[0].found_beside
    assert test.read_bytes() == original
    for k in (b, late):
        (found,) = guard.check(k, root / "kept-b", root)
        assert found.found_beside and found.path == test.resolve()
        assert "found by a stage that ran beside it" in found.describe(str, "preflight")
    assert test.read_bytes() == original  # the late stage kept the trusted bytes, not the tampered ones
    assert guard.check(other, root / "kept-o", root) == []
