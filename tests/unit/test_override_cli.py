"""Unit tests of gemswatch.cli_override (gemswatch.override.cli): the
``--override`` spec grammar, YAML/JSON config files whose relative paths
resolve against the config's folder, the command line winning over the
config, all-or-nothing application with one-line errors, and the argparse
and pytest option wiring."""

from __future__ import annotations

import argparse
import json
import sys
from types import SimpleNamespace

import pytest

from gemswatch.override.cli import (
    OverrideSpec,
    add_override_arguments,
    apply_overrides_from_args,
    collect_override_specs,
    format_overrides,
    load_override_config,
    parse_override_spec,
)
from gemswatch.override.registry import DEFAULT_MODULE, DynamicOpOverride, OverrideError

# ---------------------------------------------------------------------------
# Spec grammar: OP:PATH[:FUNC] or OP=PATH[:FUNC]; drive letters, ':' and '='
# inside a path stay in the path
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("softmax:./candidates/softmax_v2.py:my_softmax", ("softmax", "./candidates/softmax_v2.py", "my_softmax")),
        ("rms_norm:./candidates/rms_norm_v2.py", ("rms_norm", "./candidates/rms_norm_v2.py", "rms_norm")),
        ("softmax=./candidates/softmax_v2.py:my_softmax", ("softmax", "./candidates/softmax_v2.py", "my_softmax")),
        ("softmax=./candidates/softmax_v2.py", ("softmax", "./candidates/softmax_v2.py", "softmax")),
        ("addmm_:/abs/path/candidate.py:run", ("addmm_", "/abs/path/candidate.py", "run")),
        ("  softmax :  a.py  : f  ", ("softmax", "a.py", "f")),
        # Windows drives: the colon after the drive letter belongs to the path.
        (r"softmax:C:\k\softmax_v2.py", ("softmax", r"C:\k\softmax_v2.py", "softmax")),
        (r"softmax:C:\k\softmax_v2.py:my_softmax", ("softmax", r"C:\k\softmax_v2.py", "my_softmax")),
        ("softmax=C:/k/softmax_v2.py:my_softmax", ("softmax", "C:/k/softmax_v2.py", "my_softmax")),
        # '=' and ':' inside the path.
        ("softmax:a=b.py", ("softmax", "a=b.py", "softmax")),
        ("softmax=a=b.py:f", ("softmax", "a=b.py", "f")),
        ("softmax:/runs/x:y/softmax.py", ("softmax", "/runs/x:y/softmax.py", "softmax")),
        ("softmax:/runs/x:y/softmax.py:f", ("softmax", "/runs/x:y/softmax.py", "f")),
        ("softmax:a.py:my-func", ("softmax", "a.py:my-func", "softmax")),  # not an identifier: part of the path
    ],
)
def test_parse_override_spec_accepts(spec, expected):
    assert parse_override_spec(spec) == expected


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("", "expected OP:PATH"),
        ("softmax", "expected OP:PATH"),
        ("./candidates/softmax_v2.py", "expected OP:PATH"),
        (":a.py", "operator name"),
        ("=a.py:f", "operator name"),
        ("   :a.py", "operator name"),
        ("soft max:a.py", "operator name"),
        ("1softmax:a.py", "operator name"),
        ("softmax:", "path is empty"),
        ("softmax=", "path is empty"),
        ("softmax:   ", "path is empty"),
        ("softmax::my_softmax", "path is empty"),
        ("softmax:a.py:", "function name is empty"),
        ("softmax:a.py:   ", "function name is empty"),
    ],
)
def test_parse_override_spec_rejects_empty_or_malformed_parts(spec, fragment):
    with pytest.raises(OverrideError) as info:
        parse_override_spec(spec)
    message = str(info.value)
    assert repr(spec) in message
    assert fragment in message
    assert "OP:PATH[:FUNCTION]" in message


# ---------------------------------------------------------------------------
# Config files: paths relative to the config's folder, schema errors named
# ---------------------------------------------------------------------------

YAML_CONFIG = """\
overrides:
  softmax:
    file: ../candidates/softmax_v2.py
    function: my_softmax
  rms_norm: ../candidates/rms_norm_v2.py       # function name == op name
  layer_norm: ../candidates/layer_norm_v2.py:my_layer_norm
  gelu: {file: /abs/gelu.py}
  silu: "  ../candidates/silu.py : fast_silu  "
  mul: {file: mul.py, function: null}
"""


@pytest.fixture
def config_dir(tmp_path, monkeypatch):
    """Config in tmp/cfg; the working directory is somewhere else."""
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cfg


def _expected_entries(cfg):
    cands = cfg.parent / "candidates"
    return {
        "softmax": (str(cands / "softmax_v2.py"), "my_softmax"),
        "rms_norm": (str(cands / "rms_norm_v2.py"), "rms_norm"),
        "layer_norm": (str(cands / "layer_norm_v2.py"), "my_layer_norm"),
        "gelu": ("/abs/gelu.py", "gelu"),
        "silu": (str(cands / "silu.py"), "fast_silu"),
        "mul": (str(cfg / "mul.py"), "mul"),
    }


@pytest.mark.parametrize("name", ["overrides.yaml", "overrides.yml", "overrides.YAML", "Overrides.Yml"])
def test_yaml_config_every_entry_form_relative_to_the_config_folder(config_dir, name):
    path = config_dir / name
    path.write_text(YAML_CONFIG)
    assert load_override_config(path) == _expected_entries(config_dir)


@pytest.mark.parametrize("name", ["overrides.json", "overrides.JSON"])
def test_json_config_every_entry_form_relative_to_the_config_folder(config_dir, name):
    data = {
        "overrides": {
            "softmax": {"file": "../candidates/softmax_v2.py", "function": "my_softmax"},
            "rms_norm": "../candidates/rms_norm_v2.py",
            "layer_norm": "../candidates/layer_norm_v2.py:my_layer_norm",
            "gelu": {"file": "/abs/gelu.py"},
            "silu": "  ../candidates/silu.py : fast_silu  ",
            "mul": {"file": "mul.py", "function": None},
        }
    }
    path = config_dir / name
    path.write_text(json.dumps(data))
    assert load_override_config(path) == _expected_entries(config_dir)


def test_config_path_given_relative_to_cwd(config_dir):
    (config_dir / "o.yaml").write_text("overrides:\n  softmax: s.py\n")
    assert load_override_config("../cfg/o.yaml") == {"softmax": (str(config_dir / "s.py"), "softmax")}


@pytest.mark.parametrize(
    "name, text, fragment",
    [
        ("o.yaml", "override:\n  softmax: a.py\n", "no 'overrides' mapping"),  # a misspelled top-level key
        ("o.yaml", "", "no 'overrides' mapping"),  # empty YAML document
        ("o.yaml", "# only a comment\n", "no 'overrides' mapping"),
        ("o.yaml", "- softmax: a.py\n", "no 'overrides' mapping"),
        ("o.json", "", "cannot parse"),
        ("o.json", "[]", "no 'overrides' mapping"),
        ("o.yaml", "overrides:\n", "non-empty mapping"),
        ("o.yaml", "overrides: {}\n", "non-empty mapping"),
        ("o.yaml", "overrides:\n  - softmax: a.py\n", "non-empty mapping"),
        ("o.yaml", "overrides:\n  softmax: a.py\nextra: 1\n", "unknown top-level key(s) 'extra'"),
        ("o.yaml", "overrides:\n  softmax: {file: a.py, fucntion: f}\n", "unknown key(s) 'fucntion'"),
        ("o.yaml", "overrides:\n  softmax: {function: f}\n", "needs a 'file'"),
        ("o.yaml", "overrides:\n  softmax: {file: '  '}\n", "needs a 'file'"),
        ("o.yaml", "overrides:\n  softmax: {file: a.py, function: 3}\n", "invalid 'function'"),
        ("o.yaml", "overrides:\n  softmax: 3\n", "must be 'path', 'path:function'"),
        ("o.yaml", "overrides:\n  softmax: ''\n", "must be 'path', 'path:function'"),
        ("o.yaml", "overrides:\n  softmax: [a.py, f]\n", "must be 'path', 'path:function'"),
        ("o.yaml", "overrides:\n  soft max: a.py\n", "is not an identifier"),
        ("o.yaml", "overrides:\n  1: a.py\n", "is not an identifier"),
        ("o.yaml", "overrides:\n  softmax: 'a.py:'\n", "function name is empty"),
        ("o.yaml", "overrides: [\n", "cannot parse"),
        ("o.json", "{\"overrides\": ", "cannot parse"),
        ("o.toml", "[overrides]\nsoftmax = 'a.py'\n", "must end in .yaml, .yml or .json"),
        ("o.txt", "overrides:\n  softmax: a.py\n", "must end in .yaml, .yml or .json"),
        ("overrides", "overrides:\n  softmax: a.py\n", "must end in .yaml, .yml or .json"),
    ],
)
def test_config_schema_errors_are_override_errors(config_dir, name, text, fragment):
    path = config_dir / name
    path.write_text(text)
    with pytest.raises(OverrideError) as info:
        load_override_config(path)
    assert fragment in str(info.value)
    assert str(path) in str(info.value)


def test_missing_config_file_is_an_override_error(config_dir):
    with pytest.raises(OverrideError) as info:
        load_override_config("nope/overrides.yaml")
    assert "not found" in str(info.value) and "nope/overrides.yaml" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_config_entries_are_not_loaded_by_load_override_config(config_dir):
    # Reading the config does not execute candidates: a missing file is found when applying.
    (config_dir / "o.yaml").write_text("overrides:\n  softmax: missing.py\n")
    assert load_override_config(config_dir / "o.yaml")["softmax"][0] == str(config_dir / "missing.py")


# ---------------------------------------------------------------------------
# Collecting specs: config first, then --override; the command line wins
# ---------------------------------------------------------------------------


def test_command_line_wins_over_config_and_later_override_wins(config_dir):
    (config_dir / "o.yaml").write_text("overrides:\n  softmax: cfg_softmax.py:f\n  rms_norm: cfg_rms.py\n")
    args = SimpleNamespace(
        override_config=str(config_dir / "o.yaml"),
        override=["softmax:first.py:g", "gelu=gelu.py", "softmax:cli_softmax.py:h"],
    )
    specs = {s.op: s for s in collect_override_specs(args)}
    assert list(specs) == ["rms_norm", "gelu", "softmax"]  # application order
    assert specs["softmax"] == OverrideSpec("softmax", "cli_softmax.py", "h")
    assert specs["softmax"].base_dir is None  # command-line paths: against the cwd
    assert specs["rms_norm"].base_dir == str(config_dir)
    assert specs["rms_norm"].resolved_path() == config_dir / "cfg_rms.py"
    assert specs["gelu"].resolved_path() == config_dir.parent / "cwd" / "gelu.py"


def test_collect_with_nothing_requested():
    assert collect_override_specs(SimpleNamespace()) == []
    assert collect_override_specs(SimpleNamespace(override=None, override_config=None)) == []


def test_collect_reports_a_bad_spec():
    with pytest.raises(OverrideError, match="'softmax'"):
        collect_override_specs(SimpleNamespace(override=["softmax"], override_config=None))


# ---------------------------------------------------------------------------
# Applying: all or nothing, one-line errors
# ---------------------------------------------------------------------------


@pytest.fixture
def cand_dir(write):
    write("candidates/a.py", "def my_softmax(x):\n    return ('a', x)\n\n\ndef rms_norm(x):\n    return ('a-rms', x)\n")
    write("candidates/b.py", "def my_softmax(x):\n    return ('b', x)\n")
    return write("candidates/c.py", "def helper():\n    pass\n").parent


def test_apply_installs_config_and_command_line_overrides_tracked(target, cand_dir, tmp_path):
    (tmp_path / "o.yaml").write_text("overrides:\n  softmax: candidates/b.py:my_softmax\n  rms_norm: candidates/a.py\n")
    args = SimpleNamespace(
        override_config=str(tmp_path / "o.yaml"),
        override=[f"softmax:{cand_dir / 'a.py'}:my_softmax"],
        override_module=target.__name__,
    )
    registry = apply_overrides_from_args(args)
    assert isinstance(registry, DynamicOpOverride)
    assert target.softmax(1) == ("a", 1)  # the command line won
    assert target.rms_norm(1) == ("a-rms", 1)  # config path resolved against the config's folder
    assert registry.call_counts() == {f"{target.__name__}.softmax": 1, f"{target.__name__}.rms_norm": 1}
    registry.restore_all()
    assert target.softmax(1) == ("orig", 1) and target.rms_norm(1) == ("orig-rms", 1)


def test_apply_uses_the_given_registry(target, cand_dir):
    registry = DynamicOpOverride()
    args = SimpleNamespace(override=[f"softmax:{cand_dir / 'b.py'}:my_softmax"], override_module=target.__name__)
    assert apply_overrides_from_args(args, registry) is registry
    assert target.softmax(0) == ("b", 0)
    registry.restore_all()


def test_apply_relative_command_line_path_against_cwd(target, cand_dir, monkeypatch):
    monkeypatch.chdir(cand_dir)
    args = SimpleNamespace(override=["softmax=b.py:my_softmax"], override_module=target.__name__)
    registry = apply_overrides_from_args(args)
    assert target.softmax(0) == ("b", 0)
    registry.restore_all()


def test_apply_with_nothing_requested_installs_nothing(target):
    registry = apply_overrides_from_args(SimpleNamespace(override=None, override_config=None))
    assert registry.list_overrides() == []


def test_apply_without_override_module_targets_gems(make_target, cand_dir, monkeypatch):
    stand_in = make_target("gw_gems_stand_in")
    monkeypatch.setitem(sys.modules, DEFAULT_MODULE, stand_in)  # found before any import
    registry = apply_overrides_from_args(SimpleNamespace(override=[f"softmax:{cand_dir / 'a.py'}:my_softmax"]))
    assert stand_in.softmax(1) == ("a", 1)
    assert registry.call_counts() == {"gemswatch.gems.softmax": 1}
    registry.restore_all()
    assert stand_in.softmax(1) == ("orig", 1)


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("rms_norm:candidates/missing.py", "not found"),
        ("rms_norm:candidates/a.py:nope", "no function 'nope'"),
        ("rms_norm", "invalid override spec"),
    ],
)
def test_apply_is_all_or_nothing(target, cand_dir, tmp_path, monkeypatch, bad, fragment):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "o.yaml").write_text("overrides:\n  gelu: candidates/a.py:rms_norm\n")
    args = SimpleNamespace(
        override_config=str(tmp_path / "o.yaml"),
        override=["softmax:candidates/a.py:my_softmax", bad],
        override_module=target.__name__,
    )
    registry = DynamicOpOverride()
    with pytest.raises(OverrideError) as info:
        apply_overrides_from_args(args, registry)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)
    assert target.softmax(1) == ("orig", 1)
    assert not hasattr(target, "gelu")
    assert registry.list_overrides() == []


def test_apply_bad_config_installs_nothing(target, cand_dir, tmp_path):
    (tmp_path / "o.yaml").write_text("override:\n  softmax: candidates/a.py:my_softmax\n")
    args = SimpleNamespace(
        override_config=str(tmp_path / "o.yaml"),
        override=[f"rms_norm:{cand_dir / 'a.py'}"],
        override_module=target.__name__,
    )
    with pytest.raises(OverrideError, match="no 'overrides' mapping"):
        apply_overrides_from_args(args)
    assert target.rms_norm(1) == ("orig-rms", 1)


# ---------------------------------------------------------------------------
# argparse integration, end to end
# ---------------------------------------------------------------------------


def test_argparse_end_to_end(target, cand_dir, tmp_path):
    (tmp_path / "o.json").write_text(json.dumps({"overrides": {"rms_norm": "candidates/a.py"}}))
    parser = argparse.ArgumentParser(prog="my_test.py")
    parser.add_argument("--size", type=int, default=4)
    add_override_arguments(parser)
    args = parser.parse_args(
        [
            "--override", f"softmax:{cand_dir / 'b.py'}:my_softmax",
            "--override", f"softmax={cand_dir / 'a.py'}:my_softmax",
            "--override-config", str(tmp_path / "o.json"),
            "--override-module", target.__name__,
            "--size", "2",
        ]
    )
    assert args.size == 2 and args.list_overrides is False
    registry = apply_overrides_from_args(args)
    assert target.softmax(1) == ("a", 1)  # the last --override wins
    assert target.rms_norm(1) == ("a-rms", 1)
    assert format_overrides(registry) == [  # config first, then the command line
        f"{target.__name__}.rms_norm <- {cand_dir / 'a.py'}:rms_norm",
        f"{target.__name__}.softmax <- {cand_dir / 'a.py'}:my_softmax",
    ]
    registry.restore_all()
    assert target.softmax(1) == ("orig", 1)


def test_argparse_defaults_and_list_flag():
    parser = argparse.ArgumentParser()
    add_override_arguments(parser)
    args = parser.parse_args([])
    assert args.override is None and args.override_config is None
    assert args.list_overrides is False and args.override_module == DEFAULT_MODULE
    assert parser.parse_args(["--list-overrides"]).list_overrides is True
    help_text = parser.format_help()
    for option in ("--override", "--override-config", "--list-overrides", "--override-module"):
        assert option in help_text
    with pytest.raises(SystemExit):
        parser.parse_args(["-o", "x"])  # no short alias (pytest owns -o)


def test_pytest_parser_integration(pytestconfig):
    # Registered through the plugin that tests/conftest.py loads.
    assert pytestconfig.getoption("--override") is None
    assert pytestconfig.getoption("--override-config") is None
    assert pytestconfig.getoption("--list-overrides") is False
    assert pytestconfig.getoption("--override-module") == DEFAULT_MODULE


def test_pytest_parser_gets_one_named_group():
    class Group:
        def __init__(self):
            self.options = {}

        def addoption(self, name, **kwargs):
            self.options[name] = kwargs

    class FakePytestParser:
        def __init__(self):
            self.groups = {}

        def getgroup(self, name, description=""):
            return self.groups.setdefault(name, Group())

    parser = FakePytestParser()
    add_override_arguments(parser)
    assert list(parser.groups) == ["operator override"]
    options = parser.groups["operator override"].options
    assert list(options) == ["--override", "--override-config", "--list-overrides", "--override-module"]
    assert options["--override"]["action"] == "append"
    assert options["--list-overrides"]["action"] == "store_true"


def test_add_override_arguments_rejects_other_parsers():
    with pytest.raises(TypeError, match="pytest or argparse"):
        add_override_arguments(object())


# ---------------------------------------------------------------------------
# format_overrides
# ---------------------------------------------------------------------------


def _lambda_candidate(x):
    return x


def test_format_overrides(target, cand_dir):
    assert format_overrides(None) == ["no active overrides"]
    registry = DynamicOpOverride()
    assert format_overrides(registry) == ["no active overrides"]
    registry.override("rms_norm", _lambda_candidate, target.__name__)
    registry.override_from_file("sparse_op", cand_dir / "a.py", "my_softmax", target.__name__)
    assert format_overrides(registry) == [
        f"{target.__name__}.rms_norm <- <in-process> _lambda_candidate",
        f"{target.__name__}.sparse_op <- {cand_dir / 'a.py'}:my_softmax  (new attribute)",
    ]
    registry.restore_all(allow_unused=True)
