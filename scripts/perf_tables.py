"""Markdown tables (and a PNG) from gemswatch.benchmark/v1 timing reports.

    python scripts/perf_tables.py RUN.json [SECOND_RUN.json] [--ops-from LATER.json] [--png speedup.png]

Prints, per operator, one row per case: shape, dtype, torch and gems
latency, speedup, GB/s or TFLOP/s and the share of the ceiling (the copy
bandwidth measured in the same run for memory-bound ops; the datasheet dense
peak for matrix products). Then the geomean speedup per operator and across
operators, and, given a second run of the same cases, the spread of each
operator's geomean between the two runs; and how many memory-bound cases
that move at least 256 MiB reach 85 % of the copy bandwidth. ``--ops-from``
takes the operators a later, narrower run measured (e.g. after a kernel
change) in place of the first run's.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

# H200 SXM datasheet dense peaks (TFLOP/s): fp16/bf16 tensor cores; for fp32
# a third of the TF32 tensor-core peak (494.7), since gems multiplies fp32 as
# three TF32 products. (torch's fp32 GEMM runs on the CUDA cores: 67.)
PEAK_TFLOPS = {"float16": 989.0, "bfloat16": 989.0, "float32": 165.0}


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def shape_text(case: dict) -> str:
    shape = case["shape"]
    text = "x".join(str(shape[k]) for k in ("M", "N", "K")) if "M" in shape else " + ".join(
        "x".join(map(str, v)) for v in shape.values())
    params = ", ".join(f"{k}={v}" for k, v in case["params"].items())
    return text + (f" ({params})" if params else "")


def tables(report: dict) -> list[str]:
    lines = []
    for b in report["benchmarks"]:
        lines += [f"### {b['operator']}", "",
                  "| shape | dtype | torch µs | gems µs | speedup | GB/s or TFLOP/s | % of ceiling |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for c in b["cases"]:
            if c["error"]:
                lines.append(f"| {shape_text(c)} | {c['dtype']} | | | error: {c['error'][:60]} | | |")
                continue
            if c["tflops"] is not None:
                rate = f"{c['tflops']:.0f} TFLOP/s"
                pct = 100 * c["tflops"] / PEAK_TFLOPS[c["dtype"]]
            else:
                rate = f"{c['gbps']:.0f} GB/s"
                pct = c.get("pct_of_copy")
            lines.append(f"| {shape_text(c)} | {c['dtype']} | {c['latency_base'] * 1e3:.1f} | {c['latency'] * 1e3:.1f} "
                         f"| {c['speedup']:.2f} | {rate} | {'' if pct is None else f'{pct:.0f} %'} |")
        lines += ["", f"geomean speedup: **{b['geomean_speedup']:.3f}**", ""]
    return lines


def summary(runs: list[dict]) -> list[str]:
    ops = [b["operator"] for b in runs[0]["benchmarks"]]
    per_run = [{b["operator"]: b["geomean_speedup"] for b in r["benchmarks"]} for r in runs]
    head = "| operator | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + (" | spread |" if len(runs) > 1 else " |")
    lines = [head, "|---|" + "---:|" * (len(runs) + (len(runs) > 1))]
    for op in ops:
        values = [g[op] for g in per_run]
        spread = f" | {100 * (max(values) - min(values)) / min(values):.1f} %" if len(runs) > 1 else ""
        lines.append(f"| {op} | " + " | ".join(f"{v:.3f}" for v in values) + spread + " |")
    overall = [geomean(list(g.values())) for g in per_run]
    spread = f" | {100 * (max(overall) - min(overall)) / min(overall):.1f} %" if len(runs) > 1 else ""
    lines.append("| **all operators** | " + " | ".join(f"**{v:.3f}**" for v in overall) + spread + " |")
    return lines


def bandwidth(report: dict, min_bytes: int = 256 << 20, goal_pct: float = 85.0) -> list[str]:
    """Memory-bound cases moving at least ``min_bytes`` (bytes come back as
    GB/s x time, hence the 1 % leeway): how many reach the goal."""
    big = [(b["operator"], c) for b in report["benchmarks"] for c in b["cases"]
           if c["gbps"] is not None and not c["error"] and c["gbps"] * 1e6 * c["latency"] >= 0.99 * min_bytes]
    misses = [f"{op} {shape_text(c)} {c['dtype']} {c['pct_of_copy']:.1f} %" for op, c in big if c["pct_of_copy"] < goal_pct]
    lines = [f"memory-bound cases moving >= {min_bytes >> 20} MiB at >= {goal_pct:.0f} % of copy bandwidth: "
             f"{len(big) - len(misses)} of {len(big)}"]
    lowest = sorted(big, key=lambda oc: oc[1]["pct_of_copy"])[:3]
    lines.append("  lowest: " + "; ".join(f"{op} {shape_text(c)} {c['dtype']} {c['pct_of_copy']:.1f} %" for op, c in lowest))
    return lines + [f"  below: {m}" for m in misses]


def replace_ops(report: dict, later: dict) -> dict:
    """``report`` with the operators ``later`` measured taken from ``later``."""
    newer = {b["operator"]: b for b in later["benchmarks"]}
    return {**report, "benchmarks": [newer.get(b["operator"], b) for b in report["benchmarks"]]}


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    ops = [b["operator"] for b in report["benchmarks"]]
    values = [b["geomean_speedup"] for b in report["benchmarks"]]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.bar(ops, values, color=["#4a8" if v >= 1 else "#c64" for v in values])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_ylabel("geomean speedup vs torch")
    ax.set_title(f"gems vs torch eager, {report['level']} level, {report['device']}")
    plt.xticks(rotation=45, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", type=Path, nargs="+")
    ap.add_argument("--ops-from", type=Path, action="append", default=[])
    ap.add_argument("--png", type=Path)
    args = ap.parse_args()
    runs = [json.loads(p.read_text()) for p in args.reports]
    for path in args.ops_from:
        later = json.loads(path.read_text())
        runs = [replace_ops(r, later) for r in runs]
        print(f"{', '.join(b['operator'] for b in later['benchmarks'])} from {path.name}")
    print(f"copy bandwidth measured in the run: {runs[0]['copy_gbps']:.0f} GB/s; timer: {runs[0]['timer']}\n")
    print("\n".join(summary(runs)) + "\n")
    print("\n".join(bandwidth(runs[0])) + "\n")
    print("\n".join(tables(runs[0])))
    if args.png:
        plot(runs[0], args.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
