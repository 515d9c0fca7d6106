"""What installing spotroute-checkpoint on a training image costs: the wheel built from the tree,
and for each choice of extras the distributions it brings and their installed size, summed from
the RECORD files of this environment's copies (the versions `make setup` installed here).

    .venv/bin/python bench/light_install_size.py

Recorded in docs/checkpoints.md ("Install on a training image") and docs/benchmarks.md.
"""

from __future__ import annotations

import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "checkpoint")]

from light_venv import build_light_package, dependency_closure, wheel_metadata  # noqa: E402

CHOICES = [(), ("s3",), ("gcs",), ("azure",), ("s3", "gcs", "azure"), ("torch",),
           ("torch", "s3", "gcs", "azure")]


def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        built = build_light_package(Path(work))
        with zipfile.ZipFile(built.wheel) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
        sdist_kb = built.sdist.stat().st_size / 1e3
        print(f"{built.wheel.name}: {built.wheel.stat().st_size / 1e3:.0f} kB "
              f"({unpacked / 1e3:.0f} kB unpacked); sdist {sdist_kb:.0f} kB")
        provided = {"spotroute-checkpoint": wheel_metadata(built.wheel)[1]}
    print(f"{'extras':<22} {'distributions':>13} {'installed MB':>13}  largest")
    for extras in CHOICES:
        dists = dependency_closure([f"spotroute-checkpoint[{','.join(extras)}]"], provided)
        sizes = {name: sum(f.size or 0 for f in dist.files or []) for name, dist in dists.items()}
        largest = sorted(sizes, key=sizes.__getitem__, reverse=True)[:3]
        print(f"{'[' + ','.join(extras) + ']':<22} {len(dists) + 1:>13} "
              f"{sum(sizes.values()) / 1e6:>13.0f}  "
              + ", ".join(f"{name} {sizes[name] / 1e6:.0f}" for name in largest))


if __name__ == "__main__":
    main()
