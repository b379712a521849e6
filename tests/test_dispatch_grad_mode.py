"""The registered kernels run gems with grad mode off and put it back, also
when gems raises."""

from __future__ import annotations

import pytest
import torch

from gemswatch import gems


def test_grad_mode_is_off_inside_and_restored_after_an_error(monkeypatch):
    seen = []

    def spy(input, other, *, alpha=1):
        seen.append(torch.is_grad_enabled())
        raise RuntimeError("gems add failed")

    monkeypatch.setattr(gems, "add", spy)
    x = torch.ones(3, device=gems.device)
    with gems.use_gems(include=["add"]):
        with pytest.raises(RuntimeError, match="gems add failed"):
            torch.add(x, x)
    assert seen == [False]
    assert torch.is_grad_enabled()
    with torch.no_grad(), gems.use_gems(include=["add"]):
        with pytest.raises(RuntimeError, match="gems add failed"):
            torch.add(x, x)
        assert not torch.is_grad_enabled()
