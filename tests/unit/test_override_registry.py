"""Unit tests of gemswatch.dynamic_registry (gemswatch.override.registry):
overriding from Python and restoring, loading candidates from standalone
files, error messages that name the file, function and fix, call tracking and
unused candidates, wrappers that outlive their restore, dotted module names,
and the candidate's module and folder while it is installed.

Most tests override attributes of a throw-away module (the ``target``
fixture) so they never import torch; the last section overrides
``gemswatch.gems`` itself, including through the ATen dispatcher.
"""

from __future__ import annotations

import gc
import pickle
import sys
import threading
import warnings

import pytest

from gemswatch.override import registry as dynamic_registry
from gemswatch.override.registry import (
    DEFAULT_MODULE,
    DynamicOpOverride,
    OverrideError,
    get_global_registry,
    load_impl_from_file,
    override_op,
    restore_all_ops,
    restore_op,
)

CANDIDATE_PREFIX = "gemswatch_candidate_"

SOFTMAX_CANDIDATE = """
    def my_softmax(x, dim=-1, dtype=None):
        return ("cand", x)

    def softmax(x, dim=-1, dtype=None):
        return ("cand-default", x)
"""


def candidate_modules() -> set[str]:
    return {n for n in sys.modules if n.startswith(CANDIDATE_PREFIX)}


def my_softmax(x, dim=-1, dtype=None):
    return ("inline", x)


@pytest.fixture
def cand(write):
    """A candidate file outside any package whose name is not importable."""
    return write("candidates/softmax-v2.py", SOFTMAX_CANDIDATE)


# ---------------------------------------------------------------------------
# Overriding from Python, restoring
# ---------------------------------------------------------------------------


def test_default_target_module_is_gems():
    assert DEFAULT_MODULE == "gemswatch.gems"


def test_context_manager_overrides_inside_and_restores_on_exit(target):
    original = target.softmax
    with DynamicOpOverride() as registry:
        assert registry.override("softmax", my_softmax, module_name=target.__name__) is True
        assert target.softmax is my_softmax
        assert target.softmax(3) == ("inline", 3)
    assert target.softmax is original


def test_context_manager_restores_when_body_raises(target):
    original = target.softmax
    with pytest.raises(ZeroDivisionError):
        with DynamicOpOverride() as registry:
            registry.override("softmax", my_softmax, module_name=target.__name__)
            1 / 0
    assert target.softmax is original


def test_enter_installs_nothing(target):
    with DynamicOpOverride() as registry:
        assert registry.list_overrides() == []
        assert target.softmax(1) == ("orig", 1)


def test_exit_does_not_replace_body_exception_with_unused_error(target, cand):
    # The body's exception wins; the unused-candidate finding is a note on it.
    original = target.softmax
    with pytest.raises(KeyError, match="boom") as info:
        with DynamicOpOverride() as registry:
            registry.override_from_file("softmax", cand, "my_softmax", module_name=target.__name__)
            raise KeyError("boom")
    notes = getattr(info.value, "__notes__", [])
    assert len(notes) == 1
    assert f"{target.__name__}.softmax" in notes[0] and "never called" in notes[0]
    assert target.softmax is original


def test_exit_without_body_error_raises_unused_assertion_after_restoring(target, cand):
    original = target.softmax
    with pytest.raises(AssertionError, match="never called"):
        with DynamicOpOverride() as registry:
            registry.override_from_file("softmax", cand, "my_softmax", module_name=target.__name__)
    assert target.softmax is original


def test_restore_single_operator_leaves_the_others(target):
    original_softmax, original_rms = target.softmax, target.rms_norm
    registry = DynamicOpOverride()
    registry.override("softmax", my_softmax, target.__name__)
    registry.override("rms_norm", my_softmax, target.__name__)
    assert registry.restore("softmax", target.__name__) is True
    assert target.softmax is original_softmax
    assert target.rms_norm is my_softmax
    assert registry.list_overrides() == [f"{target.__name__}.rms_norm"]
    registry.restore_all()
    assert target.rms_norm is original_rms
    assert registry.list_overrides() == []


def test_restore_all_restores_every_operator_of_every_module(make_target):
    a, b = make_target(), make_target()
    before = (a.softmax, a.rms_norm, b.softmax)
    registry = DynamicOpOverride()
    registry.override("softmax", my_softmax, a.__name__)
    registry.override("rms_norm", my_softmax, a.__name__)
    registry.override("softmax", my_softmax, b.__name__)
    registry.restore_all()
    assert (a.softmax, a.rms_norm, b.softmax) == before
    assert registry.list_overrides() == []


def test_restore_all_with_module_name_restores_only_that_module(make_target):
    a, b = make_target(), make_target()
    registry = DynamicOpOverride()
    registry.override("softmax", my_softmax, a.__name__)
    registry.override("softmax", my_softmax, b.__name__)
    registry.restore_all(a.__name__)
    assert a.softmax(1) == ("orig", 1)
    assert b.softmax is my_softmax
    registry.restore_all()


def test_restore_of_an_operator_never_overridden_warns_and_returns_false(target):
    registry = DynamicOpOverride()
    with pytest.warns(UserWarning, match="not overridden by this registry"):
        assert registry.restore("softmax", target.__name__) is False
    assert target.softmax(1) == ("orig", 1)


def test_restore_twice_second_call_is_a_noop(target):
    registry = DynamicOpOverride()
    registry.override("softmax", my_softmax, target.__name__)
    assert registry.restore("softmax", target.__name__) is True
    with pytest.warns(UserWarning):
        assert registry.restore("softmax", target.__name__) is False
    assert target.softmax(1) == ("orig", 1)


def test_repeated_override_keeps_the_first_original(target):
    original = target.softmax
    registry = DynamicOpOverride()
    registry.override("softmax", my_softmax, target.__name__)
    registry.override("softmax", lambda x: "second", target.__name__)
    assert target.softmax(0) == "second"
    registry.restore("softmax", target.__name__)
    assert target.softmax is original


def test_injecting_a_new_operator_then_removing_it_on_restore(target):
    registry = DynamicOpOverride()
    assert not hasattr(target, "sparse_csr_tensor")
    registry.override("sparse_csr_tensor", my_softmax, target.__name__)
    assert target.sparse_csr_tensor(5) == ("inline", 5)
    registry.restore("sparse_csr_tensor", target.__name__)
    assert not hasattr(target, "sparse_csr_tensor")


def test_injected_file_candidate_is_removed_on_restore(target, cand):
    registry = DynamicOpOverride()
    registry.override_from_file("sparse_csr_tensor", cand, "my_softmax", target.__name__)
    assert target.sparse_csr_tensor(1) == ("cand", 1)
    registry.restore_all()
    assert "sparse_csr_tensor" not in vars(target)


def test_restore_puts_back_an_attribute_whose_original_value_is_none(target):
    registry = DynamicOpOverride()
    registry.override("nothing", my_softmax, target.__name__)
    assert target.nothing is my_softmax
    registry.restore_all()
    assert "nothing" in vars(target)
    assert target.nothing is None


def test_restore_overwrites_whatever_is_there(target):
    registry = DynamicOpOverride()
    registry.override("softmax", my_softmax, target.__name__)
    target.softmax = "clobbered by someone else"
    registry.restore_all()
    assert target.softmax(1) == ("orig", 1)


def test_two_registries_in_one_process_latest_override_wins(target):
    # Seed warning: instances are not isolated; restore_all restores only its own ops.
    first, second = DynamicOpOverride(), DynamicOpOverride()
    first.override("softmax", my_softmax, target.__name__)
    second.override("rms_norm", my_softmax, target.__name__)
    second.override("softmax", lambda x: "second", target.__name__)
    assert target.softmax(1) == "second"
    first.restore_all()
    assert target.softmax(1) == ("orig", 1)  # first's original
    assert target.rms_norm is my_softmax  # second's own op untouched
    second.restore_all()
    # second recorded first's candidate as its original: a documented hazard.
    assert target.softmax is my_softmax
    assert target.rms_norm(1) == ("orig-rms", 1)


def test_misspelled_file_candidate_fails_restore_with_did_you_mean(target, cand):
    registry = DynamicOpOverride()
    registry.override_from_file("sofmax", cand, "my_softmax", target.__name__)
    with pytest.raises(AssertionError) as info:
        registry.restore("sofmax", target.__name__)
    message = str(info.value)
    assert f"{target.__name__}.sofmax" in message
    assert "did you mean 'softmax'" in message
    assert str(cand) in message and "my_softmax" in message
    assert not hasattr(target, "sofmax")  # restored before raising
    assert registry.list_overrides() == [] and registry.call_counts() == {}


def test_uncalled_existing_operator_message_names_file_function_and_fix(target, cand):
    registry = DynamicOpOverride()
    registry.override_from_file("softmax", cand, "my_softmax", target.__name__)
    with pytest.raises(AssertionError) as info:
        registry.restore_all()
    message = str(info.value)
    assert f"{target.__name__}.softmax" in message
    assert "my_softmax" in message and str(cand) in message
    assert "check that the selected tests call" in message


# ---------------------------------------------------------------------------
# Loading from a standalone file
# ---------------------------------------------------------------------------


def test_override_from_file_outside_any_package_with_unimportable_name(target, cand):
    assert not (cand.parent / "__init__.py").exists()
    assert "-" in cand.stem  # not a valid module name
    registry = DynamicOpOverride()
    assert registry.override_from_file("softmax", str(cand), "my_softmax", target.__name__) is True
    assert target.softmax(2) == ("cand", 2)
    registry.restore_all()
    assert target.softmax(2) == ("orig", 2)


def test_func_name_defaults_to_op_name(target, cand):
    with DynamicOpOverride() as registry:
        registry.override_from_file("softmax", cand, module_name=target.__name__)
        assert target.softmax(1) == ("cand-default", 1)


def test_relative_path_resolves_against_cwd(target, cand, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with DynamicOpOverride() as registry:
        registry.override_from_file("softmax", "candidates/softmax-v2.py", "my_softmax", target.__name__)
        assert target.softmax(1) == ("cand", 1)
        assert registry.describe()[0]["file"] == str(cand)


def test_relative_path_resolves_against_base_dir_not_cwd(target, cand, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with DynamicOpOverride() as registry:
        registry.override_from_file(
            "softmax", "softmax-v2.py", "my_softmax", target.__name__, base_dir=cand.parent
        )
        assert target.softmax(1) == ("cand", 1)


def test_path_objects_are_accepted(target, cand):
    with DynamicOpOverride() as registry:
        registry.override_from_file("softmax", cand, "my_softmax", target.__name__)
        target.softmax(0)


def test_batch_accepts_string_tuple_list_and_dict_forms(target, write):
    rms = write("c/rms_norm.py", "def rms_norm(x, *a, **k):\n    return ('rms-file', x)\n")
    write("c/sm.py", "def fast(x, *a, **k):\n    return ('fast', x)\n")
    write("c/ln.py", "def ln(x):\n    return ('ln', x)\n")
    write("c/gelu.py", "def g(x):\n    return ('g', x)\n")
    folder, c = rms.parent, target.__name__
    registry = DynamicOpOverride()
    result = registry.override_batch_from_files(
        {
            "rms_norm": str(rms),  # function name == op name
            "softmax": (str(folder / "sm.py"), "fast"),
            "layer_norm": [str(folder / "ln.py"), "ln"],
            "gelu": {"file": str(folder / "gelu.py"), "function": "g"},
        },
        module_name=c,
    )
    assert result == {"rms_norm": True, "softmax": True, "layer_norm": True, "gelu": True}
    assert registry.call_counts() == {f"{c}.rms_norm": 0, f"{c}.softmax": 0, f"{c}.layer_norm": 0, f"{c}.gelu": 0}
    assert target.rms_norm(1) == ("rms-file", 1)
    assert target.softmax(1) == ("fast", 1)
    assert target.layer_norm(1) == ("ln", 1)
    assert target.gelu(1) == ("g", 1)
    assert registry.call_counts() == {f"{c}.rms_norm": 1, f"{c}.softmax": 1, f"{c}.layer_norm": 1, f"{c}.gelu": 1}
    registry.restore_all()
    assert not hasattr(target, "gelu") and not hasattr(target, "layer_norm")
    assert target.softmax(1) == ("orig", 1) and target.rms_norm(1) == ("orig-rms", 1)


def test_batch_is_all_or_nothing_and_lists_every_failure(target, cand, write):
    broken = write("candidates/broken.py", "def rms_norm(:\n")
    path_before, modules_before = list(sys.path), candidate_modules()
    registry = DynamicOpOverride()
    with pytest.raises(OverrideError) as info:
        registry.override_batch_from_files(
            {
                "softmax": (str(cand), "my_softmax"),  # good: must not be installed
                "rms_norm": str(broken),  # syntax error
                "layer_norm": str(cand.parent / "missing.py"),  # missing file
                "gelu": (str(cand), "gelu_v3"),  # missing function
            },
            module_name=target.__name__,
        )
    message = str(info.value)
    for op in ("rms_norm", "layer_norm", "gelu"):
        assert f"{target.__name__}.{op} <- function" in message
    assert f"{target.__name__}.softmax" not in message  # the good entry is not a failure
    assert "broken.py" in message and "SyntaxError" in message
    assert "missing.py" in message and "not found" in message
    assert "'gelu_v3'" in message
    assert target.softmax(1) == ("orig", 1)
    assert not hasattr(target, "layer_norm") and not hasattr(target, "gelu")
    assert registry.list_overrides() == [] and registry.call_counts() == {}
    assert sys.path == path_before
    assert candidate_modules() == modules_before


def test_failed_batch_leaves_earlier_overrides_of_the_registry_alone(target, cand):
    registry = DynamicOpOverride()
    registry.override_from_file("softmax", cand, "my_softmax", target.__name__)
    installed = target.softmax
    with pytest.raises(OverrideError):
        registry.override_batch_from_files({"softmax": (str(cand), "nope")}, target.__name__)
    assert target.softmax is installed
    target.softmax(1)
    registry.restore_all()


@pytest.mark.parametrize(
    "spec",
    [("CAND", "f", "extra"), ("CAND",), 42, None, {"function": "f"}, {"file": ""}, (3, "f"), ("CAND", 5)],
    ids=["3-tuple", "1-tuple", "int", "none", "dict-without-file", "dict-empty-file", "path-not-str", "func-not-str"],
)
def test_batch_rejects_malformed_entries_with_override_error(target, cand, spec):
    if isinstance(spec, tuple):
        spec = tuple(str(cand) if part == "CAND" else part for part in spec)
    registry = DynamicOpOverride()
    with pytest.raises(OverrideError):
        registry.override_batch_from_files({"softmax": spec}, target.__name__)
    assert target.softmax(1) == ("orig", 1)
    assert candidate_modules() == set()


def test_load_impl_from_file_returns_the_function(cand):
    func = load_impl_from_file(cand, "my_softmax")
    assert func.__name__ == "my_softmax"
    assert func(4) == ("cand", 4)


def test_load_impl_from_file_relative_to_base_dir(cand):
    assert load_impl_from_file("softmax-v2.py", "softmax", base_dir=cand.parent)(1) == ("cand-default", 1)


# ---------------------------------------------------------------------------
# Errors: OverrideError (a ValueError) naming file, function, fix
# ---------------------------------------------------------------------------


def test_override_error_is_a_value_error():
    assert issubclass(OverrideError, ValueError)


@pytest.mark.parametrize(
    "source, func, expected",
    [
        ("def my_softmax(x):\n    return x\n\n\ndef broken(:\n    pass\n", "my_softmax", ["SyntaxError", "line 5", "fix the file"]),
        ("import gemswatch_no_such_module_xyz\n\ndef my_softmax(x):\n    return x\n", "my_softmax",
         ["ModuleNotFoundError", "gemswatch_no_such_module_xyz", "fix it"]),
        ("raise RuntimeError('kaboom at import')\n", "my_softmax", ["RuntimeError", "kaboom at import", "fix it"]),
        ("import sys\nsys.exit(3)\n", "my_softmax", ["SystemExit", "fix it"]),
        ("def my_softmax_v2(x):\n    return x\n", "my_softmax",
         ["'my_softmax'", "did you mean 'my_softmax_v2'", "my_softmax_v2", "op:path:function"]),
        ("my_softmax = 3\n", "my_softmax", ["'my_softmax'", "int", "not a function", "callable"]),
    ],
    ids=["syntax-error", "import-error", "raises-at-import", "sys-exit-at-import", "missing-function", "not-callable"],
)
def test_load_failures_raise_override_error_naming_file_function_and_fix(target, write, source, func, expected):
    path = write("cands/bad_candidate.py", source)
    path_before, modules_before = list(sys.path), candidate_modules()
    registry = DynamicOpOverride()
    with pytest.raises(OverrideError) as info:
        registry.override_from_file("softmax", path, func, target.__name__)
    message = str(info.value)
    assert str(path) in message
    assert f"{target.__name__}.softmax <- function {func!r}" in message  # operator and function
    for fragment in expected:
        assert fragment in message
    assert "\n" not in message
    # Nothing installed, nothing left behind.
    assert target.softmax(1) == ("orig", 1)
    assert registry.list_overrides() == [] and registry.call_counts() == {}
    assert sys.path == path_before
    assert candidate_modules() == modules_before


def test_missing_function_hint_lists_only_the_files_own_functions(target, write):
    path = write("cands/imports.py", "from os.path import join\n\ndef run(x):\n    return x\n")
    with pytest.raises(OverrideError) as info:
        DynamicOpOverride().override_from_file("softmax", path, module_name=target.__name__)
    assert "it defines: run." in str(info.value)


def test_load_impl_from_file_raises_override_error_too(write):
    path = write("cands/x.py", "def f():\n    pass\n")
    with pytest.raises(OverrideError, match="has no function 'g'"):
        load_impl_from_file(path, "g")


def test_missing_file_names_the_given_and_resolved_path(target, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OverrideError) as info:
        DynamicOpOverride().override_from_file("softmax", "nowhere/softmax_v9.py", module_name=target.__name__)
    message = str(info.value)
    assert f"{target.__name__}.softmax <- function 'softmax'" in message
    assert "nowhere/softmax_v9.py" in message
    assert str(tmp_path / "nowhere" / "softmax_v9.py") in message
    assert "check the path" in message


def test_directory_instead_of_file(target, tmp_path):
    with pytest.raises(OverrideError, match="not a file"):
        DynamicOpOverride().override_from_file("softmax", tmp_path, module_name=target.__name__)


@pytest.mark.parametrize("op_name", ["", "1softmax", "soft-max", "soft max", "class", "a.b", None])
def test_invalid_operator_names_are_rejected(target, cand, op_name):
    registry = DynamicOpOverride()
    with pytest.raises(OverrideError, match="invalid operator name"):
        registry.override(op_name, my_softmax, target.__name__)
    with pytest.raises(OverrideError, match="invalid operator name"):
        registry.override_from_file(op_name, cand, "my_softmax", target.__name__)
    assert registry.list_overrides() == []


@pytest.mark.parametrize("impl", [None, 3, "my_softmax"])
def test_non_callable_bare_override_is_rejected(target, impl):
    registry = DynamicOpOverride()
    with pytest.raises(OverrideError, match="not callable"):
        registry.override("softmax", impl, target.__name__)
    assert target.softmax(1) == ("orig", 1)


def test_override_batch_is_all_or_nothing(target):
    registry = DynamicOpOverride()
    with pytest.raises(OverrideError):
        registry.override_batch({"softmax": my_softmax, "rms_norm": 7}, target.__name__)
    assert target.softmax(1) == ("orig", 1)
    assert registry.override_batch({"softmax": my_softmax, "rms_norm": my_softmax}, target.__name__) == {
        "softmax": True,
        "rms_norm": True,
    }
    registry.restore_all()


@pytest.mark.parametrize("module_name", ["gemswatch_no_such_target_module", "not a module", "", "a..b"])
def test_bad_target_module_raises_override_error(cand, module_name):
    registry = DynamicOpOverride()
    with pytest.raises(OverrideError, match="module"):
        registry.override("softmax", my_softmax, module_name)
    with pytest.raises(OverrideError, match="module"):
        registry.override_from_file("softmax", cand, "my_softmax", module_name)


# ---------------------------------------------------------------------------
# Call tracking; an installed file candidate never called fails restore
# ---------------------------------------------------------------------------


def test_call_counts_track_file_candidates_by_full_name(target, cand):
    full = f"{target.__name__}.softmax"
    with DynamicOpOverride() as registry:
        registry.override_from_file("softmax", cand, "my_softmax", target.__name__)
        assert registry.call_counts() == {full: 0}
        target.softmax(1)
        target.softmax(2)
        assert registry.call_counts() == {full: 2}
        counts = registry.call_counts()
        counts[full] = 99  # a copy
        assert registry.call_counts() == {full: 2}
    assert registry.call_counts() == {}


def test_call_is_counted_before_forwarding_so_a_raising_candidate_counts(target, write):
    path = write("cands/raiser.py", "def softmax(x):\n    raise RuntimeError('candidate bug')\n")
    registry = DynamicOpOverride()
    registry.override_from_file("softmax", path, module_name=target.__name__)
    with pytest.raises(RuntimeError, match="candidate bug"):
        target.softmax(1)
    assert registry.call_counts() == {f"{target.__name__}.softmax": 1}
    registry.restore_all()  # invoked once: no unused-candidate error


def test_counting_wrapper_keeps_the_candidates_metadata(target, write):
    path = write("cands/meta.py", 'def run(x, *, scale=2):\n    "Candidate doc."\n    return x * scale\n')
    with DynamicOpOverride() as registry:
        registry.override_from_file("softmax", path, "run", target.__name__)
        wrapper = registry.get_override("softmax", target.__name__)
        assert wrapper is target.softmax
        assert wrapper.__name__ == "run" and wrapper.__doc__ == "Candidate doc."
        assert wrapper.__wrapped__.__module__.startswith(CANDIDATE_PREFIX)
        assert wrapper(3, scale=5) == 15


def test_counts_are_exact_under_threads(target, cand):
    with DynamicOpOverride() as registry:
        registry.override_from_file("softmax", cand, "my_softmax", target.__name__)

        def hammer():
            for _ in range(2000):
                target.softmax(0)

        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert registry.call_counts() == {f"{target.__name__}.softmax": 8000}


def test_bare_override_is_not_tracked(target):
    registry = DynamicOpOverride()
    registry.override("softmax", my_softmax, target.__name__)
    assert registry.call_counts() == {}
    registry.restore_all()  # never called, yet no AssertionError
    assert target.softmax(1) == ("orig", 1)


def test_bare_override_after_file_override_untracks(target, cand):
    # The bare replacement is what runs now; the file candidate is gone.
    registry = DynamicOpOverride()
    registry.override_from_file("softmax", cand, "my_softmax", target.__name__)
    registry.override("softmax", my_softmax, target.__name__)
    assert registry.call_counts() == {}
    assert registry.get_override("softmax", target.__name__) is my_softmax
    assert registry.unused() == {}
    registry.restore_all()  # no AssertionError for the discarded file candidate
    assert target.softmax(1) == ("orig", 1)


def test_file_override_after_bare_override_is_tracked_and_keeps_first_original(target, cand):
    original = target.softmax
    registry = DynamicOpOverride()
    registry.override("softmax", my_softmax, target.__name__)
    registry.override_from_file("softmax", cand, "my_softmax", target.__name__)
    assert registry.call_counts() == {f"{target.__name__}.softmax": 0}
    with pytest.raises(AssertionError):
        registry.restore_all()
    assert target.softmax is original


def test_second_file_override_resets_the_count(target, cand, write):
    other = write("cands/other.py", "def softmax(x):\n    return ('other', x)\n")
    registry = DynamicOpOverride()
    registry.override_from_file("softmax", cand, "my_softmax", target.__name__)
    target.softmax(1)
    registry.override_from_file("softmax", other, module_name=target.__name__)
    assert registry.call_counts() == {f"{target.__name__}.softmax": 0}
    assert target.softmax(1) == ("other", 1)
    registry.restore_all()


def test_get_override(target, cand):
    registry = DynamicOpOverride()
    assert registry.get_override("softmax", target.__name__) is None
    registry.override("rms_norm", my_softmax, target.__name__)
    registry.override_from_file("softmax", cand, "my_softmax", target.__name__)
    assert registry.get_override("rms_norm", target.__name__) is my_softmax
    wrapper = registry.get_override("softmax", target.__name__)
    assert wrapper is target.softmax and wrapper.__wrapped__.__name__ == "my_softmax"
    assert registry.get_override("softmax") is None  # default module is gemswatch.gems
    registry.restore_all(allow_unused=True)
    assert registry.get_override("softmax", target.__name__) is None


def test_restore_all_allow_unused_restores_silently(target, cand):
    registry = DynamicOpOverride()
    registry.override_from_file("softmax", cand, "my_softmax", target.__name__)
    registry.override_from_file("sofmax", cand, "my_softmax", target.__name__)
    registry.restore_all(allow_unused=True)
    assert target.softmax(1) == ("orig", 1) and not hasattr(target, "sofmax")
    assert registry.call_counts() == {}


def test_restore_allow_unused_for_one_operator(target, cand):
    registry = DynamicOpOverride()
    registry.override_from_file("softmax", cand, "my_softmax", target.__name__)
    assert registry.restore("softmax", target.__name__, allow_unused=True) is True


def test_restore_all_restores_everything_before_raising_one_error_listing_all(target, cand):
    registry = DynamicOpOverride()
    registry.override_from_file("softmax", cand, "my_softmax", target.__name__)
    registry.override_from_file("sofmax", cand, "my_softmax", target.__name__)
    registry.override_from_file("rms_norm", cand, "my_softmax", target.__name__)
    target.rms_norm(1)
    with pytest.raises(AssertionError) as info:
        registry.restore_all()
    message = str(info.value)
    assert f"{target.__name__}.softmax" in message and f"{target.__name__}.sofmax" in message
    assert "rms_norm" not in message
    assert target.softmax(1) == ("orig", 1) and target.rms_norm(1) == ("orig-rms", 1)
    assert not hasattr(target, "sofmax")
    assert registry.list_overrides() == []


def test_list_overrides_and_describe(target, cand):
    c = target.__name__
    registry = DynamicOpOverride()
    registry.override("rms_norm", my_softmax, c)
    registry.override_from_file("sparse", cand, "my_softmax", c)
    assert registry.list_overrides() == [f"{c}.rms_norm", f"{c}.sparse"]
    rows = {row["operator"]: row for row in registry.describe()}
    assert rows["rms_norm"]["file"] is None and rows["rms_norm"]["calls"] is None and rows["rms_norm"]["existed"]
    assert rows["sparse"]["file"] == str(cand) and rows["sparse"]["function"] == "my_softmax"
    assert rows["sparse"]["calls"] == 0 and rows["sparse"]["existed"] is False
    registry.restore_all(allow_unused=True)


# ---------------------------------------------------------------------------
# A wrapper still referenced after restore keeps working and never raises;
# dropping a registry runs no check at garbage collection
# ---------------------------------------------------------------------------


def test_stale_wrapper_keeps_working_after_restore(target, cand):
    registry = DynamicOpOverride()
    registry.override_from_file("softmax", cand, "my_softmax", target.__name__)
    captured = target.softmax  # e.g. a dispatcher registration made inside the block
    captured(1)
    registry.restore_all()
    assert captured(2) == ("cand", 2)  # never KeyError


def test_stale_wrapper_of_an_uncalled_candidate_after_allowed_restore(target, cand):
    registry = DynamicOpOverride()
    registry.override_from_file("softmax", cand, "my_softmax", target.__name__)
    captured = registry.get_override("softmax", target.__name__)
    registry.restore_all(allow_unused=True)
    assert captured(3) == ("cand", 3)
    assert registry.call_counts() == {}


def test_dropping_a_registry_runs_no_gc_time_check(target, cand, monkeypatch):
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    registry = DynamicOpOverride()
    registry.override_from_file("softmax", cand, "my_softmax", target.__name__)
    del registry
    gc.collect()
    assert unraisable == []



# ---------------------------------------------------------------------------
# Global API
# ---------------------------------------------------------------------------


def test_global_api(target):
    assert get_global_registry() is get_global_registry() is dynamic_registry._global_registry
    assert override_op("softmax", my_softmax, target.__name__) is True
    assert target.softmax is my_softmax
    assert f"{target.__name__}.softmax" in get_global_registry().list_overrides()
    assert restore_op("softmax", target.__name__) is True
    assert target.softmax(1) == ("orig", 1)
    override_op("rms_norm", my_softmax, target.__name__)
    override_op("new_op", my_softmax, target.__name__)
    restore_all_ops(target.__name__)
    assert target.rms_norm(1) == ("orig-rms", 1) and not hasattr(target, "new_op")
    assert get_global_registry().list_overrides() == []


# ---------------------------------------------------------------------------
# Dotted module names: imported when first named; restoring the parent leaves
# the child alone
# ---------------------------------------------------------------------------


@pytest.fixture
def dotted_package(tmp_path, monkeypatch):
    """A package ``gwdotted.sub`` on disk, not imported yet."""
    root = tmp_path / "site"
    (root / "gwdotted" / "sub").mkdir(parents=True)
    (root / "gwdotted" / "__init__.py").write_text("def softmax(x):\n    return ('top', x)\n")
    (root / "gwdotted" / "sub" / "__init__.py").write_text("def softmax(x):\n    return ('sub', x)\n")
    monkeypatch.syspath_prepend(str(root))
    yield "gwdotted.sub"
    for name in ("gwdotted.sub", "gwdotted"):
        sys.modules.pop(name, None)


def test_dotted_module_is_imported_overridden_and_restored(dotted_package, cand):
    assert dotted_package not in sys.modules
    registry = DynamicOpOverride()
    registry.override_from_file("softmax", cand, "my_softmax", dotted_package)
    registry.override("rms_norm", my_softmax, dotted_package)
    sub, top = sys.modules[dotted_package], sys.modules["gwdotted"]
    assert sub.softmax(1) == ("cand", 1)
    assert registry.call_counts() == {"gwdotted.sub.softmax": 1}
    assert registry.list_overrides() == ["gwdotted.sub.softmax", "gwdotted.sub.rms_norm"]
    registry.restore_all()
    assert sub.softmax(1) == ("sub", 1)
    assert not hasattr(sub, "rms_norm")
    assert top.softmax(1) == ("top", 1)
    assert "sub.softmax" not in vars(top) and "sub.rms_norm" not in vars(top)
    assert registry.list_overrides() == []


def test_restore_all_of_parent_module_does_not_touch_dotted_child(dotted_package):
    registry = DynamicOpOverride()
    registry.override("softmax", my_softmax, "gwdotted")
    registry.override("softmax", my_softmax, dotted_package)
    registry.restore_all("gwdotted")
    sub, top = sys.modules[dotted_package], sys.modules["gwdotted"]
    assert top.softmax(1) == ("top", 1)
    assert sub.softmax is my_softmax
    assert "sub.softmax" not in vars(top)
    registry.restore_all(dotted_package)
    assert sub.softmax(1) == ("sub", 1)


def test_restore_single_op_of_dotted_module(dotted_package):
    registry = DynamicOpOverride()
    registry.override("softmax", my_softmax, dotted_package)
    assert registry.restore("softmax", dotted_package) is True
    assert sys.modules[dotted_package].softmax(1) == ("sub", 1)


# ---------------------------------------------------------------------------
# The candidate's module is in sys.modules and its folder on sys.path while
# it is installed, and both are gone after
# ---------------------------------------------------------------------------

SIBLING_CANDIDATE = """
    from __future__ import annotations

    import dataclasses

    from gw_sibling_helper import SCALE  # a module next to this file


    @dataclasses.dataclass
    class Config:
        block: int = 4


    def softmax(x):
        import gw_sibling_lazy  # imported at call time

        return ("sib", x * SCALE * gw_sibling_lazy.FACTOR, Config().block)
"""


@pytest.fixture
def sibling_candidate(write):
    write("sib/gw_sibling_helper.py", "SCALE = 10\n")
    write("sib/gw_sibling_lazy.py", "FACTOR = 3\n")
    yield write("sib/softmax_sib.py", SIBLING_CANDIDATE)
    for name in ("gw_sibling_helper", "gw_sibling_lazy"):
        sys.modules.pop(name, None)


def test_candidate_module_and_folder_registered_while_installed_and_removed_after(target, sibling_candidate):
    folder = str(sibling_candidate.parent)
    assert folder not in sys.path
    registry = DynamicOpOverride()
    registry.override_from_file("softmax", sibling_candidate, module_name=target.__name__)
    func = registry.get_override("softmax", target.__name__).__wrapped__
    module = sys.modules[func.__module__]
    assert module.__file__ == str(sibling_candidate)
    assert folder in sys.path
    assert target.softmax(2) == ("sib", 60, 4)  # sibling imports work, at load and at call time
    assert pickle.loads(pickle.dumps(func)) is func  # picklable: module found by name
    registry.restore_all()
    assert folder not in sys.path
    assert func.__module__ not in sys.modules


def test_folder_already_on_sys_path_stays_after_restore(target, sibling_candidate, monkeypatch):
    folder = str(sibling_candidate.parent)
    monkeypatch.syspath_prepend(folder)
    with DynamicOpOverride() as registry:
        registry.override_from_file("softmax", sibling_candidate, module_name=target.__name__)
        target.softmax(1)
    assert sys.path.count(folder) == 1


def test_shared_folder_stays_on_sys_path_while_another_candidate_needs_it(target, sibling_candidate, write):
    write("sib/rms_lazy.py", "def rms_norm(x):\n    import gw_sibling_lazy\n    return gw_sibling_lazy.FACTOR * x\n")
    folder = str(sibling_candidate.parent)
    registry = DynamicOpOverride()
    registry.override_from_file("softmax", sibling_candidate, module_name=target.__name__)
    registry.override_from_file("rms_norm", sibling_candidate.parent / "rms_lazy.py", module_name=target.__name__)
    target.softmax(1)
    registry.restore("softmax", target.__name__)
    assert folder in sys.path
    sys.modules.pop("gw_sibling_lazy", None)
    assert target.rms_norm(2) == 6  # its lazy sibling import still resolves
    registry.restore_all()
    assert folder not in sys.path


def test_bare_override_releases_the_file_candidates_module_and_folder(target, sibling_candidate):
    registry = DynamicOpOverride()
    registry.override_from_file("softmax", sibling_candidate, module_name=target.__name__)
    name = registry.get_override("softmax", target.__name__).__wrapped__.__module__
    registry.override("softmax", my_softmax, target.__name__)
    assert name not in sys.modules
    assert str(sibling_candidate.parent) not in sys.path
    registry.restore_all()


def test_replacing_a_file_candidate_releases_the_old_one(target, cand, sibling_candidate):
    registry = DynamicOpOverride()
    registry.override_from_file("softmax", sibling_candidate, module_name=target.__name__)
    old = registry.get_override("softmax", target.__name__).__wrapped__.__module__
    registry.override_from_file("softmax", cand, "my_softmax", target.__name__)
    assert old not in sys.modules
    assert str(sibling_candidate.parent) not in sys.path
    assert str(cand.parent) in sys.path
    target.softmax(1)
    registry.restore_all()
    assert candidate_modules() == set()


def test_same_file_for_two_operators(target, cand):
    with DynamicOpOverride() as registry:
        registry.override_batch_from_files(
            {"softmax": (str(cand), "my_softmax"), "rms_norm": (str(cand), "softmax")}, target.__name__
        )
        assert target.softmax(1) == ("cand", 1) and target.rms_norm(1) == ("cand-default", 1)
        registry.restore("softmax", target.__name__)
        assert target.rms_norm.__wrapped__.__module__ in sys.modules
        assert str(cand.parent) in sys.path
    assert candidate_modules() == set()
    assert str(cand.parent) not in sys.path


# ---------------------------------------------------------------------------
# Overriding gemswatch.gems itself, directly and through the dispatcher
# ---------------------------------------------------------------------------


@pytest.fixture
def gems():
    try:
        from gemswatch import gems
    except Exception as e:  # the operator library is built in parallel
        pytest.skip(f"gemswatch.gems cannot be imported: {type(e).__name__}: {e}")
    return gems


def test_context_manager_override_of_gems_softmax_is_called_then_restored(gems):
    import torch

    calls = []

    def my_softmax(input, dim=-1, dtype=None):
        calls.append(dim)
        return torch.softmax(input, dim=dim, dtype=dtype)

    original = gems.softmax
    with DynamicOpOverride() as registry:
        registry.override("softmax", my_softmax)
        x = torch.randn(10, 10, device=gems.device)
        result = gems.softmax(x)  # uses my_softmax
    assert calls == [-1]
    torch.testing.assert_close(result, torch.softmax(x, dim=-1))
    assert gems.softmax is original


def test_explicit_restore_and_injected_gems_operator_removed_by_restore_all(gems):
    registry = DynamicOpOverride()
    registry.override("softmax", my_softmax)
    registry.override("sparse_csr_tensor", my_softmax)
    assert gems.sparse_csr_tensor(1) == ("inline", 1)
    registry.restore("softmax")
    assert gems.softmax is not my_softmax
    registry.restore_all()
    assert not hasattr(gems, "sparse_csr_tensor")


def _counting_softmax(calls):
    def my_softmax(input, dim=-1, dtype=None, *rest):
        # Registered for aten::_softmax(self, dim, half_to_float) as well:
        # compute without dispatching back into softmax.
        calls.append(tuple(input.shape))
        x = input.double()
        e = (x - x.amax(dim=dim, keepdim=True)).exp()
        return (e / e.sum(dim=dim, keepdim=True)).to(input.dtype)

    return my_softmax


def test_override_before_use_gems_reaches_the_dispatcher(gems):
    import torch

    calls = []
    x = torch.randn(4, 8, device=gems.device)
    with DynamicOpOverride() as registry:
        registry.override("softmax", _counting_softmax(calls))
        with gems.use_gems():
            y = torch.softmax(x, dim=-1)
    assert calls, "torch.softmax did not reach the overriding candidate"
    torch.testing.assert_close(y, torch.softmax(x, dim=-1))
    calls.clear()
    torch.softmax(x, dim=-1)  # dispatch state restored after use_gems()
    assert calls == []



def test_injected_operator_adds_no_dispatcher_registration(gems):
    keys_before = list(gems._FULL_CONFIG)
    with DynamicOpOverride() as registry:
        registry.override("sparse_csr_tensor", my_softmax)
        assert list(gems._FULL_CONFIG) == keys_before
        assert gems.sparse_csr_tensor(2) == ("inline", 2)


def test_override_with_default_module_warns_nothing(gems):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with DynamicOpOverride() as registry:
            registry.override("softmax", my_softmax)
