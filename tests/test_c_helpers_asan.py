"""The C helpers under AddressSanitizer and UBSan: random marker soup in exact-size heap blocks
(fuzz/asan_c_helpers.c). Skipped where no C compiler with sanitizers is installed."""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_c_helpers_are_clean_under_sanitizers(tmp_path: Path) -> None:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    binary = tmp_path / "asan_c_helpers"
    libdir = str(sysconfig.get_config_var("LIBDIR"))
    build = subprocess.run(
        [
            cc,
            "-O1",
            "-g",
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=undefined",
            "-fno-omit-frame-pointer",
            f"-I{sysconfig.get_paths()['include']}",
            str(ROOT / "fuzz" / "asan_c_helpers.c"),
            "-o",
            str(binary),
            f"-L{libdir}",
            f"-lpython{sysconfig.get_config_var('LDVERSION')}",
            f"-Wl,-rpath,{libdir}",
        ],
        capture_output=True,
        text=True,
    )
    if build.returncode != 0:
        pytest.skip(f"no sanitizer build here: {build.stderr.strip().splitlines()[-1:]}")
    run = subprocess.run([str(binary), "100000"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "clean" in run.stdout
