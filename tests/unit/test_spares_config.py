"""Spare stages' pure parts: the ``spares:`` key, when spares are on, and
how many each device slot keeps."""

from __future__ import annotations

import pytest
from test_watch_config import GOOD, errors, project

from gemswatch.watch.config import load_config
from gemswatch.watch.stage.spares import spares_per_slot, spares_wanted


def test_spares_default_to_auto_and_read_yaml_booleans(tmp_path):
    assert load_config(project(tmp_path, GOOD)).spares == "auto"
    assert load_config(project(tmp_path, GOOD + "spares: on\n")).spares == "on"
    assert load_config(project(tmp_path, GOOD + "spares: off\n")).spares == "off"
    assert load_config(project(tmp_path, GOOD + "spares: auto\n")).spares == "auto"


def test_a_bad_spares_value_names_the_line_and_the_fix(tmp_path):
    (line,) = errors(tmp_path, GOOD + "spares: sometimes\n")
    assert line == (
        "config.yaml:15: spares: expected on, off or auto, got 'sometimes'; "
        "write `spares: auto` (on for a GPU), `spares: on` or `spares: off`"
    )


@pytest.mark.parametrize(
    "setting,kind,wanted",
    [("auto", "cuda", True), ("auto", "cpu", False), ("on", "cpu", True), ("off", "cuda", False)],
)
def test_auto_means_spares_on_a_gpu_only(setting, kind, wanted):
    assert spares_wanted(setting, kind) is wanted


def test_each_slot_keeps_a_spare_per_stage_it_runs_at_once_and_one_for_the_next_stage():
    assert spares_per_slot(jobs=1, slots=1) == 2  # preflight, then correctness at once after it
    assert spares_per_slot(jobs=4, slots=4) == 2  # one GPU per job
    assert spares_per_slot(jobs=2, slots=1) == 3
    assert spares_per_slot(jobs=0, slots=0) == 2
