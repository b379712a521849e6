"""Ray and what it needs, as wheels small enough to carry to an offline GPU host.

    python scripts/slim_ray_wheels.py OUTDIR [--python 3.12] [--ray 2.60.0]

Downloads (from the package index this machine reaches) the Ray wheel for
the given CPython on x86-64 Linux and every wheel it needs, then rewrites
the Ray wheel without what a stage executor never loads: the Java workers'
jar, the dashboard's web client and the libraries built on Ray (rllib,
serve, data, train, tune, llm, air). The core (the raylet, the GCS server,
``_raylet.so``, the runtime-env agent) stays. The rewritten wheel keeps its
name and a RECORD that matches its files, so ``pip install --no-index
--no-deps OUTDIR/*.whl`` installs it as usual. Prints the sizes.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

# Folders of the Ray wheel a cluster that runs gemswatch's stages never imports.
UNUSED = ("ray/jars/", "ray/dashboard/client/", "ray/rllib/", "ray/serve/", "ray/data/", "ray/train/",
          "ray/tune/", "ray/llm/", "ray/air/")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")


def download(out: Path, python: str, requirement: str, no_deps: bool) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", python,
           "--implementation", "cp", "-d", str(out), requirement]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    if no_deps:
        cmd.insert(4, "--no-deps")
    subprocess.run(cmd, check=True)


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def slim(wheel: Path) -> None:
    """Rewrite ``wheel`` in place without the :data:`UNUSED` folders."""
    tmp = wheel.with_suffix(".slim")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as dst:
        record_name = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD"))
        lines = []
        for info in src.infolist():
            if info.filename.startswith(UNUSED) or info.filename == record_name:
                continue
            data = src.read(info)
            dst.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
            lines.append(_record_line(info.filename, data))
        dst.writestr(record_name, "\n".join(lines + [f"{record_name},,"]) + "\n")
    tmp.replace(wheel)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--python", default="3.12")
    ap.add_argument("--ray", default="2.60.0")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    download(args.out, args.python, f"ray=={args.ray}", no_deps=False)
    (ray_wheel,) = args.out.glob(f"ray-{args.ray}-*.whl")
    before = ray_wheel.stat().st_size
    slim(ray_wheel)
    total = sum(p.stat().st_size for p in args.out.glob("*.whl"))
    print(f"{ray_wheel.name}: {before / 2**20:.1f} MiB -> {ray_wheel.stat().st_size / 2**20:.1f} MiB; "
          f"all {len(list(args.out.glob('*.whl')))} wheels: {total / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
