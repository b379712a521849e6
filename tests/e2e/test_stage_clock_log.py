"""An isolated session's log ends with where its time went (gemswatch.testing.stage_clock)."""

from __future__ import annotations

pytest_plugins = ["pytester"]


def test_an_isolated_session_ends_its_log_with_its_clock(pytester):
    pytester.makeconftest('pytest_plugins = ["gemswatch.testing.correctness"]\n')
    pytester.makepyfile(cand="import torch\n\ndef my_softmax(x, dim=-1, dtype=None):\n    return torch.softmax(x, dim)\n")
    pytester.makepyfile(test_a="import torch\n\ndef test_a():\n    assert torch.softmax(torch.ones(3), 0).sum() == 1\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--override", "softmax:cand.py:my_softmax")
    line = [ln for ln in result.stderr.lines if ln.startswith("gemswatch: stage clock")]
    assert len(line) == 1, result.stderr.lines
    names = [part.rsplit(" ", 1)[0] for part in line[0].split(": ", 2)[2].split(", ")]
    assert names == ["worker started", "candidate loaded", "collected", "first test", "tests done"]
