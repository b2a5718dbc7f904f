"""Time `triage batch` on Ray (2 workers) against the serial loop (`--local`) on the corpus repeated
to an archive of at least 200 MB, generated in a temporary directory.

The archive: files of about --file-mb each, every one the corpus's logs concatenated in turn
(so each file holds real failures and real noise), until --total-mb is reached. Both runs go
through `triage.fleet.batch.run_batch`, the function behind the command, and write their rows;
the Ray run's start-up (`ray.init`) is timed apart from the job. The rows of both runs are compared.
The machine's load average is printed before and after: on a shared machine it is part of the result.

    python bench/batch.py                    # 200 MB, 2 MB files, 2 workers
    python bench/batch.py --total-mb 50 --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from triage.fleet.batch import EngineSpec, run_batch  # noqa: E402
from triage.read import expand_inputs  # noqa: E402


def make_archive(dest: Path, total_mb: float, file_mb: float) -> tuple[int, int]:
    """Write the archive; returns (files, bytes)."""
    logs = [p for _, p in expand_inputs([str(ROOT / "corpus")]) if p and p.suffix == ".log"]
    texts = [p.read_bytes() for p in logs]
    total, files, i = 0, 0, 0
    target, per_file = int(total_mb * 1e6), int(file_mb * 1e6)
    while total < target:
        host = dest / f"host-{files % 16:02d}"
        host.mkdir(parents=True, exist_ok=True)
        size = 0
        with (host / f"server-{files:05d}.log").open("wb") as fh:
            while size < per_file:
                text = texts[i % len(texts)]
                fh.write(text if text.endswith(b"\n") else text + b"\n")
                size += len(text) + (not text.endswith(b"\n"))
                i += 1
        total += size
        files += 1
    return files, total


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-mb", type=float, default=200)
    parser.add_argument("--file-mb", type=float, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    opts = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="triage-bench-batch-"))
    try:
        files, size = make_archive(tmp / "archive", opts.total_mb, opts.file_mb)
        print(f"archive: {files} files, {size / 1e6:.1f} MB in {tmp / 'archive'}")
        print(f"cores: {os.cpu_count()}, load average before: {load()}")
        spec = EngineSpec()
        began = time.perf_counter()
        serial = run_batch([str(tmp / "archive")], tmp / "serial", local=True, spec=spec)
        serial_wall = time.perf_counter() - began
        print(f"load average after serial: {load()}")
        began = time.perf_counter()
        ray = run_batch([str(tmp / "archive")], tmp / "ray", workers=opts.workers, spec=spec)
        ray_wall = time.perf_counter() - began
        print(f"load average after ray: {load()}")
        same = (tmp / "serial" / "rows.jsonl").read_bytes() == (
            tmp / "ray" / "rows.jsonl"
        ).read_bytes()
        result = {
            "files": files,
            "mb": round(size / 1e6, 1),
            "workers": opts.workers,
            "serial_s": round(serial.seconds, 2),
            "serial_wall_s": round(serial_wall, 2),
            "ray_job_s": round(ray.seconds, 2),
            "ray_startup_s": round(ray.startup_seconds, 2),
            "ray_wall_s": round(ray_wall, 2),
            "speedup_job": round(serial.seconds / ray.seconds, 2),
            "speedup_wall": round(serial_wall / ray_wall, 2),
            "serial_mb_s": round(size / 1e6 / serial.seconds, 1),
            "ray_mb_s": round(size / 1e6 / ray.seconds, 1),
            "rows_identical": same,
        }
        print(json.dumps(result, indent=2))
    finally:
        if opts.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
