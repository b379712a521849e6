"""config.yaml validation (one line per problem, with its line) and the mapping."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gemswatch.watch.config import ConfigError, load_config
from gemswatch.watch.mapping import CandidateMap, local_imports, match_glob, selection_for


def project(tmp_path: Path, config: str, files: dict[str, str] | None = None) -> Path:
    base = {
        "cands/softmax_v2.py": "def my_softmax(x):\n    return x\n",
        "tests/test_softmax.py": "",
        "tests/test_norm.py": "",
        "benchmark/test_softmax_perf.py": "",
    }
    base.update(files or {})
    for rel, text in base.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(textwrap.dedent(config))
    return cfg


GOOD = """\
watch: cands
benchmark: auto
jobs: 2
timeouts:
  correctness: 60
candidates:
  softmax_v2.py:
    softmax: my_softmax
operators:
  softmax:
    tests: tests/test_softmax.py
    benchmark: benchmark/test_softmax_perf.py::test_softmax
  rms_norm:
    tests: tests/test_norm.py
"""


def errors(tmp_path, config, files=None) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load_config(project(tmp_path, config, files))
    return [str(i) for i in e.value.issues]


def test_good_config(tmp_path):
    cfg = load_config(project(tmp_path, GOOD))
    assert cfg.watch == (tmp_path / "cands").resolve()
    assert cfg.benchmark == "auto" and cfg.jobs == 2 and cfg.level == "core"
    assert cfg.timeouts["correctness"] == 60 and cfg.timeouts["preflight"] == 300
    assert cfg.candidates[0].operators == (("softmax", "my_softmax"),)
    assert cfg.operators["softmax"].marker == "softmax"


def test_unknown_key_names_line_and_fix(tmp_path):
    (line,) = errors(tmp_path, GOOD + "benchmrk: auto\n")
    assert line.startswith("config.yaml:15: benchmrk: unknown key;")
    assert "`benchmark`" in line


def test_wrong_type(tmp_path):
    (line,) = errors(tmp_path, GOOD.replace("jobs: 2", "jobs: many"))
    assert line.startswith("config.yaml:3: jobs: expected auto or a positive integer")


def test_negative_timeout(tmp_path):
    (line,) = errors(tmp_path, GOOD.replace("correctness: 60", "correctness: -1"))
    assert line.startswith("config.yaml:5: timeouts.correctness:")


def test_unknown_policy(tmp_path):
    (line,) = errors(tmp_path, GOOD.replace("benchmark: auto", "benchmark: sometimes"))
    assert "config.yaml:2: benchmark: unknown policy 'sometimes'; use never, manual or auto" == line


def test_glob_matching_nothing(tmp_path):
    (line,) = errors(tmp_path, GOOD.replace("softmax_v2.py:", "softmax_v9.py:"))
    assert line.startswith("config.yaml:7: candidates.'softmax_v9.py': 'softmax_v9.py' matches no file")


def test_operator_without_tests(tmp_path):
    bad = GOOD.replace("    softmax: my_softmax", "    softmax: my_softmax\n    layer_norm: ln")
    (line,) = errors(tmp_path, bad)
    assert line.startswith("config.yaml:9: candidates.'softmax_v2.py'.layer_norm: operator 'layer_norm' has no tests;")


def test_selection_path_missing_is_an_error_for_a_used_operator(tmp_path):
    (line,) = errors(tmp_path, GOOD.replace("tests/test_softmax.py", "tests/test_sofmax.py"))
    assert line.startswith("config.yaml:11: operators.softmax.tests: 'tests/test_sofmax.py' matches nothing")


def test_selection_path_missing_is_a_warning_for_an_unused_operator(tmp_path):
    cfg = load_config(project(tmp_path, GOOD.replace("tests/test_norm.py", "tests/test_nrm.py")))
    assert [w.key for w in cfg.warnings] == ["operators.rms_norm.tests"]


def test_path_outside_project(tmp_path):
    lines = errors(tmp_path, GOOD.replace("tests/test_softmax.py", "../elsewhere/test_x.py"))
    assert any("is outside the project" in ln for ln in lines)


def test_candidate_glob_outside_watch(tmp_path):
    lines = errors(tmp_path, GOOD.replace("softmax_v2.py:", "../x.py:"))
    assert any("outside the watched folder" in ln for ln in lines)


def test_duplicate_mapping_of_one_file(tmp_path):
    bad = GOOD.replace("operators:", "  '*.py': softmax\noperators:")
    lines = errors(tmp_path, bad)
    assert any("also mapped by 'softmax_v2.py'" in ln for ln in lines)


def test_duplicate_yaml_key(tmp_path):
    lines = errors(tmp_path, GOOD + "jobs: 3\n")
    assert any("duplicate key (first at line 3)" in ln for ln in lines)


def test_yaml_syntax_error_names_line(tmp_path):
    (line,) = errors(tmp_path, GOOD + "candidates: [oops\n")
    assert line.startswith("config.yaml:") and "YAML syntax error" in line


def test_empty_file(tmp_path):
    (line,) = errors(tmp_path, "")
    assert "empty" in line


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


def test_candidate_forms(tmp_path):
    cfg = load_config(
        project(
            tmp_path,
            GOOD.replace("    softmax: my_softmax", "    - softmax").replace("operators:", "  'sub/**/*.py': [softmax]\noperators:"),
            {"cands/sub/a/b.py": ""},
        )
    )
    assert [r.operators for r in cfg.candidates] == [(("softmax", "softmax"),), (("softmax", "softmax"),)]


def test_watch_override(tmp_path):
    project(tmp_path, GOOD)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "softmax_v2.py").write_text("")
    cfg = load_config(tmp_path / "config.yaml", watch_override=tmp_path / "other")
    assert cfg.watch == (tmp_path / "other").resolve()


# -- mapping --------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern,path,ok",
    [
        ("*.py", "a.py", True),
        ("*.py", "x/a.py", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "x/y/a.py", True),
        ("x/**/a.py", "x/a.py", True),
        ("x/**/a.py", "x/q/r/a.py", True),
        ("x/**/a.py", "y/a.py", False),
        ("softmax_v?.py", "softmax_v2.py", True),
        ("softmax_v?.py", "softmax_v10.py", False),
    ],
)
def test_match_glob(pattern, path, ok):
    assert match_glob(pattern, path) is ok


def test_lookup_and_candidates(tmp_path):
    cfg = load_config(project(tmp_path, GOOD, {"cands/helper.py": ""}))
    cmap = CandidateMap(cfg)
    assert [c.rel for c in cmap.candidates()] == ["cands/softmax_v2.py"]
    assert cmap.lookup(tmp_path / "cands" / "helper.py") is None
    assert cmap.lookup(tmp_path / "elsewhere.py") is None


def test_selection_merges_paths_and_markers(tmp_path):
    cfg = load_config(
        project(
            tmp_path,
            GOOD
            + "  log_softmax:\n    tests: tests/test_softmax.py -k 'not slow'\n    benchmark: benchmark/test_softmax_perf.py::test_log_softmax\n",
        )
    )
    sel = selection_for(cfg, ["softmax", "log_softmax"], "tests")
    assert sel.args == ("tests/test_softmax.py", "-k", "not slow", "-m", "softmax or log_softmax")
    bsel = selection_for(cfg, ["softmax", "log_softmax"], "benchmark")
    assert bsel.args == ("benchmark/test_softmax_perf.py::test_softmax", "benchmark/test_softmax_perf.py::test_log_softmax")


def test_marker_null_disables_it(tmp_path):
    cfg = load_config(project(tmp_path, GOOD.replace("    benchmark: benchmark/test_softmax_perf.py::test_softmax", "    marker: null")))
    assert selection_for(cfg, ["softmax"], "tests").args == ("tests/test_softmax.py",)
    assert not selection_for(cfg, ["softmax"], "benchmark")


def test_fingerprint_follows_the_pipeline(tmp_path):
    cfg = load_config(project(tmp_path, GOOD))
    cand = CandidateMap(cfg).candidates()[0]
    fp = cand.fingerprint(cfg)
    (tmp_path / "config.yaml").write_text(GOOD.replace("tests/test_softmax.py", "tests/test_softmax.py -x"))
    cfg2 = load_config(tmp_path / "config.yaml")
    assert CandidateMap(cfg2).candidates()[0].fingerprint(cfg2) != fp


def test_local_imports(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "util.py").write_text("")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "_helpers.py").write_text("")
    src = "import torch\nimport _helpers\nfrom pkg.util import thing\nfrom . import nothing\nimport os.path\n"
    deps = local_imports(src, tmp_path / "c" / "cand.py", [tmp_path])
    assert deps == {
        (tmp_path / "c" / "_helpers.py").resolve(),
        (tmp_path / "pkg" / "__init__.py").resolve(),
        (tmp_path / "pkg" / "util.py").resolve(),
    }
    assert local_imports("def broken(:\n", tmp_path / "c" / "x.py", [tmp_path]) == set()


@pytest.mark.parametrize(
    "edit,where,fix",
    [
        ("  correctness: '60\n", "5: timeouts.correctness: YAML syntax error: the quote opened on this line", "close the quote"),
        ("  correctness: 60: 70\n", "5: timeouts.correctness: YAML syntax error: mapping values are not allowed",
         "put the nested key on its own, indented line, or quote the value"),
        ("  correctness: 60\n pre: 1\n", "6: timeouts.pre: YAML syntax error: the indentation does not match",
         "indent the key like its siblings, with spaces"),
    ],
    ids=["unclosed-quote", "two-colons", "indentation"],
)
def test_yaml_errors_name_the_key_the_line_and_a_fix(tmp_path, edit, where, fix):
    (line,) = errors(tmp_path, GOOD.replace("  correctness: 60\n", edit))
    assert line.startswith("config.yaml:" + where) and line.endswith("; " + fix), line


def test_the_nearest_gemswatch_config_above_the_working_folder_is_found(tmp_path):
    from gemswatch.watch.commands.session_setup import find_config

    (tmp_path / "config.yaml").write_text("watch: candidates\ncandidates:\n  a.py:\n    softmax: f\n")
    inner = tmp_path / "candidates" / "deep"
    inner.mkdir(parents=True)
    (tmp_path / "candidates" / "config.yaml").write_text("some_other_tool: true\n")  # not gemswatch's
    assert find_config(inner) == tmp_path / "config.yaml"
    assert find_config(tmp_path) == tmp_path / "config.yaml"
    (tmp_path / "config.yaml").unlink()
    assert find_config(inner) is None  # only another tool's config.yaml is left


def test_a_watched_folder_where_every_glob_misses_is_named_in_one_line():
    from pathlib import Path

    from gemswatch.watch.commands.session_setup import wrong_folder
    from gemswatch.watch.config import ConfigIssue

    misses = [ConfigIssue(f"candidates.'{g}'", 3, f"'{g}' matches no file in tests/", "fix the name") for g in ("a.py", "b.py")]
    line = wrong_folder(misses, Path("tests"), Path("/p/config.yaml"), rules=2)
    assert line.startswith("gemswatch: tests holds no candidate") and "'a.py', 'b.py'" in line
    # One name wrong among right ones: the usual did-you-mean, not this line.
    assert wrong_folder(misses[:1], Path("tests"), Path("/p/config.yaml"), rules=2) is None


def test_a_typod_operator_key_gets_a_did_you_mean(tmp_path):
    (line,) = errors(tmp_path, GOOD.replace("  softmax:\n    tests:", "  sofmax:\n    tests:"))
    assert "operator 'softmax' has no tests" in line and "did you mean `sofmax`?" in line


@pytest.mark.parametrize("argv,words", [
    (["run", "--help"], "candidate files, or folders of them"),
    (["history", "--help"], "a candidate file (its saves) or an operator"),
    (["--help"], "gemswatch [watch] [DIR]"),
])
def test_every_positional_argument_and_the_watch_command_have_help(argv, words, capsys):
    from gemswatch.watch.cli import main

    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    assert words in " ".join(capsys.readouterr().out.split())
