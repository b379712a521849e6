"""Draw the dashboard of a realistic session to SVG (docs/dashboard.svg at 160
columns, docs/dashboard-80.svg at 80) from the current code.

The state is built by feeding the reducer the events a session emits: a
softmax candidate whose wide rows are scaled (correctness fails in
float32 and float16, with the failure groups, the seed, the coverage and
the end of the log as a real stage reports them), an rms_norm candidate
that passed and was benchmarked, and a third file still running. The
softmax row is selected, so the detail pane shows its failure.

    python scripts/dashboard_svg.py            # writes both files under docs/
    python scripts/dashboard_svg.py --text 80  # prints the screen at 80 columns
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

from rich.console import Console

from gemswatch.watch.dashboard import DashboardState, render

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX = "candidates/softmax_v3.py"
RMS = "candidates/rms_norm_v2.py"
LAYER = "candidates/layer_norm_v1.py"
RUN = "20260101-101500000-softmax_v3-6aba4ada-2229001"

GROUPS = [
    {"test": "test_widths", "dtype": "float32", "failed": 2, "of": 5, "cases": ["test_widths[large]", "test_widths[huge]"],
     "shapes": [[1, 8193], [1, 65537]], "error": "AssertionError: 64 of 8193 elements differ",
     "worst_case": "test_widths[large]", "worst_rel_err": 2.0e-3, "worst_abs_err": 6.94e-5, "worst_shape": [1, 8193],
     "worst_index": [0, 4402]},
    {"test": "test_random_shapes", "dtype": "float16", "failed": 1, "of": 2, "cases": ["test_random_shapes[2]"],
     "shapes": [[1, 36809]], "error": "AssertionError: 2 of 36809 elements differ",
     "worst_case": "test_random_shapes[2]", "worst_rel_err": 2.21e-3, "worst_abs_err": 3.1e-5, "worst_shape": [1, 36809],
     "worst_index": [0, 33682]},
    {"test": "test_layouts", "dtype": "float16", "failed": 1, "of": 1, "cases": ["test_layouts"], "shapes": [[2, 9000]],
     "error": "AssertionError: 55 of 18000 elements differ", "worst_case": "test_layouts", "worst_rel_err": 1.9e-3,
     "worst_abs_err": 3.7e-5, "worst_shape": [2, 9000], "worst_index": [0, 8701]},
    {"test": "test_dtype_argument", "dtype": "float32", "failed": 1, "of": 1, "cases": ["test_dtype_argument"],
     "shapes": [[3, 9000]], "error": "AssertionError: 166 of 27000 elements differ", "worst_case": "test_dtype_argument",
     "worst_rel_err": 1.8e-3, "worst_abs_err": 6.6e-5, "worst_shape": [3, 9000], "worst_index": [1, 3030]},
]
DETAIL = (
    "AssertionError: 64 of 8193 elements differ; worst at index (0, 4402): got 0.034692615270614624, expected "
    "0.034623227700779406 (abs err 6.94e-05, rel err 0.002, allowed 8.19e-06); rule for torch.float32, n=8193: "
    "|got - want| <= 1.3e-06*|want| + 0.000118*mag + 0.000118*max(mag) (or *scale) + 1.18e-38 (slack 1.3e-06*sqrt(n)); "
    "bias within 4 sigma of one-ulp rounding + 0.000118 [case: softmax(x of shape (1, 8193), torch.float32, stride (8193, 1), dim=-1)]"
)
LOG_TAIL = """\
        except AssertionError as e:
>           raise AssertionError(f"{e} {_describe(op, x, dim, kw)}") from None
E           AssertionError: 2 of 36809 elements differ; worst at index (0, 33682): got 0.014068603515625, expected 0.014037629269034027 (abs err 3.1e-05, rel err 0.00221, allowed 2.37e-05) [case: softmax(x of shape (1, 36809), torch.float16, stride (36809, 1), dim=-1)]

tests/_softmax_family.py:93: AssertionError
gemswatch: case seed 562546449 (replay with --seed 562546449)
FAILED tests/test_softmax.py::test_widths[large] - AssertionError: 64 of 8193...
FAILED tests/test_softmax.py::test_widths[huge] - AssertionError: 3 of 65537 ...
8 failed, 21 passed, 10 skipped in 4.73s
"""
COVERAGE = {"softmax": {"cases": 29, "size_class": ["huge", "large", "medium", "small", "tiny"],
                        "dtype": ["bfloat16", "float16", "float32"],
                        "layout": ["contiguous", "expanded", "padded", "stepped", "transposed"]}}


def _event(kind: str, cand: str, run_id: str, sha: str, ops: list[str], **fields) -> dict:
    return {"event": kind, "time": "2026-01-01T10:15:42.000+00:00", "candidate": cand, "run_id": run_id,
            "operators": ops, "content_sha256": sha, **fields}


def build_state() -> DashboardState:
    st = DashboardState(watch="candidates/", project="/home/me/gemswatch", device="cuda: NVIDIA H200 (1 GPU)", jobs=1,
                        benchmark="manual", warm="warm: pool 12231 ready (3.0 s to preload gemswatch.gems, torch, triton, pytest)")
    st.set_candidates([(SOFTMAX, ["softmax"]), (RMS, ["rms_norm"]), (LAYER, ["layer_norm"])])
    sha = "6aba4ada" + "0" * 56
    st.apply(_event("run_queued", SOFTMAX, RUN, sha, ["softmax"], stages=["preflight", "correctness"]), now=0.0)
    st.apply(_event("stage_finished", SOFTMAX, RUN, sha, ["softmax"], stage="preflight", status="passed", duration_s=3.8,
                    cases={"passed": 12, "failed": 0, "skipped": 0, "total": 12}, candidate_calls={"softmax": 12}))
    st.apply(_event(
        "stage_finished", SOFTMAX, RUN, sha, ["softmax"], stage="correctness", status="failed", duration_s=4.7,
        cases={"passed": 21, "failed": 8, "skipped": 10, "total": 39}, candidate_calls={"softmax": 93}, seed=562546449,
        message="tests/test_softmax.py::test_widths[large]: AssertionError: 64 of 8193 elements differ; worst at index "
                "(0, 4402): got 0.034692615270614624, expected 0.034623227700779406 (abs err 6.94e-05, rel err 0.002)",
        first_failure="tests/test_softmax.py::test_widths[large]", detail=DETAIL, failure_groups=GROUPS,
        coverage=COVERAGE, skips={"tests the gems kernel's own behaviour, not the operator contract; softmax is overridden": 10},
        log=f"/home/me/gemswatch/.gemswatch/runs/{RUN}/correctness.log", log_tail=LOG_TAIL))
    rsha = "91c2e07f" + "0" * 56
    rrun = "20260101-101200000-rms_norm_v2-91c2e07f-2228004"
    st.apply(_event("run_queued", RMS, rrun, rsha, ["rms_norm"], stages=["preflight", "correctness", "benchmark"]))
    st.apply(_event("stage_finished", RMS, rrun, rsha, ["rms_norm"], stage="preflight", status="passed", duration_s=2.9,
                    cases={"passed": 8, "failed": 0, "skipped": 0, "total": 8}, candidate_calls={"rms_norm": 8}))
    st.apply(_event("stage_finished", RMS, rrun, rsha, ["rms_norm"], stage="correctness", status="passed", duration_s=6.1,
                    cases={"passed": 62, "failed": 0, "skipped": 5, "total": 67}, candidate_calls={"rms_norm": 388},
                    seed=1222374404, skips={"tests the gems kernel's own behaviour": 5}))
    st.apply(_event("stage_finished", RMS, rrun, rsha, ["rms_norm"], stage="benchmark", status="passed", duration_s=41.0,
                    cases={"passed": 16, "failed": 0, "skipped": 0, "total": 16}, candidate_calls={"rms_norm": 16},
                    speedup=1.32, speedup_prev=1.2,
                    per_case=[{"case": "c1", "label": "bfloat16 x=[4096, 8192]", "speedup": 0.91, "latency_ms": 0.21,
                               "base_ms": 0.19, "pct_of_copy": 61.0, "prev": 0.95},
                              {"case": "c2", "label": "float16 x=[1024, 1024]", "speedup": 1.9, "latency_ms": 0.012,
                               "base_ms": 0.023, "pct_of_copy": 44.0, "prev": 1.7}]))
    lsha = "3f00d1e2" + "0" * 56
    lrun = "20260101-101540000-layer_norm_v1-3f00d1e2-2229050"
    st.apply(_event("run_queued", LAYER, lrun, lsha, ["layer_norm"], stages=["preflight", "correctness"]), now=0.0)
    st.apply(_event("stage_started", LAYER, lrun, lsha, ["layer_norm"], stage="preflight"), now=0.0)
    st.now = 2.4
    st.note("config.yaml reloaded")
    st.note("config.yaml reloaded")
    while st.selected_candidate() != SOFTMAX:
        st.select(1)
    return st


def screen_text(width: int, height: int = 40) -> str:
    console = Console(file=io.StringIO(), width=width, height=height, color_system=None, force_terminal=False)
    console.print(render(build_state()))
    return console.file.getvalue()


def write_svg(path: Path, width: int, height: int) -> None:
    console = Console(record=True, width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor")
    console.print(render(build_state()))
    path.write_text(console.export_svg(title=f"gemswatch ({width} columns)"), encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--text", type=int, metavar="WIDTH", help="print the screen at WIDTH columns instead")
    args = ap.parse_args()
    if args.text:
        print(screen_text(args.text), end="")
        return
    write_svg(ROOT / "docs" / "dashboard.svg", 160, 40)
    write_svg(ROOT / "docs" / "dashboard-80.svg", 80, 40)
    print("wrote docs/dashboard.svg (160 columns) and docs/dashboard-80.svg (80 columns)")


if __name__ == "__main__":
    main()
