"""The hostile corpus on this machine's own device, through `gemswatch run --json`.

    python scripts/corpus_run.py [--executor ray] [NAME.py ...]

The corpus test (tests/e2e/test_hostile_corpus.py) pins stages to the CPU;
this runs the same files (default: all of tests/corpus/manifest.yaml) in a
scratch project on whatever device the machine has (a GPU one included) and
prints each file's verdict against the one the manifest expects. It is a
check to run by hand, not a test; it exits 1 when a verdict differs. With
``--executor ray`` every stage is a task on a Ray cluster started for each
group of files (the limits are then those of a cold stage: 40 s and 80 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from test_hostile_corpus import ALONE, BENCHED, ENTRIES, build_project, check_statuses  # noqa: E402


def run(names: list[str], executor: str = "local") -> tuple[list[dict], float]:
    """The events of one `gemswatch run --json` over ``names`` in a scratch project."""
    with tempfile.TemporaryDirectory(prefix="gemswatch-corpus-") as tmp:
        proj = build_project(Path(tmp), names, benchmark=any(n in BENCHED for n in names))
        # Stages compile kernels on a GPU, and a Ray stage starts cold: the CPU test's 10 s is short.
        if torch.cuda.is_available() or executor == "ray":
            config = yaml.safe_load((proj / "config.yaml").read_text())
            config["timeouts"] = {"preflight": 40, "correctness": 80}
            (proj / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        env = {k: v for k, v in os.environ.items() if k != "GEMSWATCH_DEVICE"}
        t0 = time.monotonic()
        events = []
        # Streamed, so that a run stopped early still shows the verdicts it reached.
        with subprocess.Popen(
            [sys.executable, "-m", "gemswatch.watch", "run", "--json", "--executor", executor],
            cwd=proj, env=env, stdout=subprocess.PIPE, text=True,
        ) as proc:
            for line in proc.stdout:
                if line.startswith("{"):
                    events.append(json.loads(line))
                    _show(events[-1])
        return events, time.monotonic() - t0


def _show(e: dict) -> None:
    if e["event"] == "stage_finished" and e["status"] != "not_run":
        print(f"{e['candidate']:34s} {e['stage']:12s} {e['status']:11s} {e['duration_s']:6.2f}s  {e.get('message', '')[:110]}", flush=True)


def main(argv: list[str]) -> int:
    executor = "local"
    if argv[:1] == ["--executor"] and len(argv) > 1:
        executor, argv = argv[1], argv[2:]
    names = argv or list(ENTRIES)
    # Files that edit what judges every stage beside theirs run on their own.
    groups = [[n for n in names if n not in ALONE and n not in BENCHED], [n for n in names if n in BENCHED]]
    groups += [[n] for n in names if n in ALONE]
    problems, seconds = [], 0.0
    for group in filter(None, groups):
        events, took = run(group, executor)
        seconds += took
        problems += check_statuses(events, group)
    print(f"{len(names)} files in {seconds:.1f} s; " + ("every verdict as expected" if not problems else "DIFFERENT:"))
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
