"""`gemswatch ab`: which candidates are compared, and their per-case ratios B/A with 95 % intervals."""

from __future__ import annotations

import math

import pytest

from gemswatch.watch.ab_stats import compare_rounds, t_quantile_975


def test_a_clearly_slower_b_is_significant_and_its_ratio_is_the_geomean():
    a = [{"c": 1.0}, {"c": 1.1}, {"c": 0.9}]
    b = [{"c": 3.0}, {"c": 3.3}, {"c": 2.6}]
    (row,) = compare_rounds(a, b, {"c": "float32 x=[4]"})
    assert row.verdict == "B slower" and row.significant and row.label == "float32 x=[4]"
    assert row.ratio == pytest.approx(math.exp((math.log(3.0) + math.log(3.0) + math.log(2.6 / 0.9)) / 3))
    assert 1 < row.low < row.ratio < row.high


def test_noise_around_one_is_not_significant_and_a_faster_b_is():
    a = [{"same": 1.0, "fast": 2.0}, {"same": 1.0, "fast": 2.1}, {"same": 1.0, "fast": 1.9}]
    b = [{"same": 1.05, "fast": 1.0}, {"same": 0.95, "fast": 1.02}, {"same": 1.01, "fast": 0.97}]
    rows = {r.case: r for r in compare_rounds(a, b)}
    assert rows["same"].verdict == "no significant difference" and rows["same"].low < 1 < rows["same"].high
    assert rows["fast"].verdict == "B faster" and rows["fast"].high < 1


def test_one_round_gives_a_ratio_without_an_interval():
    (row,) = compare_rounds([{"c": 1.0}], [{"c": 2.0}])
    assert row.ratio == pytest.approx(2.0) and row.low is None and row.verdict == "too few rounds"


def test_a_case_only_one_side_timed_is_left_out_and_rounds_must_pair():
    assert [r.case for r in compare_rounds([{"x": 1.0, "y": 1.0}] * 2, [{"x": 1.0}] * 2)] == ["x"]
    with pytest.raises(ValueError, match="rounds come in pairs"):
        compare_rounds([{"x": 1.0}], [])


def test_t_quantiles_shrink_towards_the_normal_one():
    assert t_quantile_975(1) == 12.706 and t_quantile_975(11) == t_quantile_975(10)
    assert t_quantile_975(1000) == 1.960


# -- which operator and functions the two sides are ------------------------------


@pytest.fixture
def cfg(tmp_path):
    from gemswatch.watch.config import load_config

    files = {
        "cands/a.py": "", "cands/b.py": "", "cands/norm.py": "", "scratch/loose.py": "",
        "tests/test_x.py": "", "benchmark/test_perf.py": "",
        "config.yaml": ("watch: cands\ncandidates:\n  a.py:\n    softmax: fast\n  b.py:\n    softmax: slow\n"
                        "  norm.py:\n    rms_norm: rms\noperators:\n"
                        "  softmax:\n    tests: [tests/test_x.py]\n    benchmark: benchmark/test_perf.py::test_s\n"
                        "  rms_norm:\n    tests: [tests/test_x.py]\n    benchmark: benchmark/test_perf.py::test_r\n"),
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return load_config(tmp_path / "config.yaml")


def test_mapped_sides_keep_their_own_functions_and_an_unmapped_side_borrows(cfg):
    from gemswatch.watch.commands.ab import pair_candidates

    a, b = pair_candidates(cfg, str(cfg.watch / "a.py"), str(cfg.watch / "b.py"), None)
    assert (a.operators, b.operators) == ((("softmax", "fast"),), (("softmax", "slow"),))
    a, loose = pair_candidates(cfg, str(cfg.watch / "a.py"), str(cfg.project / "scratch/loose.py"), None)
    assert loose.operators == (("softmax", "fast"),) and loose.rel == "scratch/loose.py"


def test_sides_without_a_common_operator_name_the_fix(cfg):
    from gemswatch.watch.commands.ab import pair_candidates

    err = pair_candidates(cfg, str(cfg.watch / "a.py"), str(cfg.watch / "norm.py"), None)
    assert isinstance(err, str) and "share no mapped operator" in err and "--op OP:FUNC" in err
    loose = str(cfg.project / "scratch/loose.py")
    assert "give --op" in pair_candidates(cfg, loose, loose, None)
    a, b = pair_candidates(cfg, loose, loose, "softmax:my_softmax")
    assert a.operators == b.operators == (("softmax", "my_softmax"),)
