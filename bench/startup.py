"""Start-up benchmark: loading the knowledge base from YAML vs from the compiled SQLite file, and
`triage` end to end on a 10-line log with each.

    python bench/startup.py [--runs N] [--json]

The headline (`triage` as users run it, history on, on a 10-line log with a warm cache) is the
median of 20 runs interleaved with `rg --no-unicode -f` searching the same file for the same
exported patterns (ripgrep compiles them on every run: that is its start-up).

Everything is written under a temporary directory (cache, history); the user's files are untouched.
Numbers are medians (min and max alongside) of N runs in fresh processes where it matters.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "examples" / "vllm-kv-cache-oom.log"


def _stats(samples: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(samples) * 1000, 1),
        "min_ms": round(min(samples) * 1000, 1),
        "max_ms": round(max(samples) * 1000, 1),
        "runs": len(samples),
    }


def _time(func: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        func()
        out.append(time.perf_counter() - start)
    return out


def _phases(code: str, arg: str, env: dict[str, str], runs: int) -> list[list[float]]:
    """Per-phase seconds printed (as a JSON list) by a fresh interpreter running code."""
    out = []
    for _ in range(runs):
        proc = subprocess.run(
            [sys.executable, "-c", code, arg],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        out.append([float(x) for x in json.loads(proc.stdout.strip().splitlines()[-1])])
    return out


def _wall(args: list[str], env: dict[str, str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, check=False)
        out.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(args)} failed: {proc.stderr.decode()[-500:]}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="triage-bench-") as tmp:
        tmpdir = Path(tmp)
        ten = tmpdir / "ten.log"
        ten.write_text("".join(LOG.read_text(encoding="utf-8").splitlines(True)[:10]))
        env = {
            **os.environ,
            "TRIAGE_CACHE_DIR": str(tmpdir / "cache"),
            "TRIAGE_DB": str(tmpdir / "history.db"),
        }
        env.pop("TRIAGE_KB", None)
        env.pop("TRIAGE_NO_KB_CACHE", None)
        # A regular install compiles the package's bytecode; under PYTHONDONTWRITEBYTECODE an
        # editable checkout would recompile every module in every timed process (about 60 ms).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(ROOT / "triage")], env=env, check=False
        )
        yaml_env = {**env, "TRIAGE_NO_KB_CACHE": "1"}
        os.environ.update({k: env[k] for k in ("TRIAGE_CACHE_DIR", "TRIAGE_DB")})

        from triage.kb import store
        from triage.kb.load import load_signatures
        from triage.kb.paths import content_hash, default_signature_dir

        root = default_signature_dir()
        built = store.build(root)
        n_sigs = len(built.signatures)
        results: dict[str, object] = {"signatures": n_sigs, "build_s": round(built.seconds, 2)}

        # In this process (imports done): the load itself.
        results["load_yaml"] = _stats(_time(lambda: load_signatures(root), max(2, opts.runs // 2)))
        results["load_sqlite"] = _stats(_time(lambda: store.load_current(root), opts.runs * 4))
        results["content_hash"] = _stats(_time(lambda: content_hash(root), opts.runs * 4))
        results["stat_key"] = _stats(_time(lambda: store.stat_key(root), opts.runs * 4))

        # In a fresh interpreter: imports, load_kb(), Engine(), the first run on the 10 lines.
        code = (
            "import json, sys, time; t0 = time.perf_counter(); "
            "from triage.api import Engine, load_kb; t1 = time.perf_counter(); "
            "kb = load_kb(); t2 = time.perf_counter(); eng = Engine(kb); "
            "t3 = time.perf_counter(); eng.run([sys.argv[1]]); t4 = time.perf_counter(); "
            "print(json.dumps([t1 - t0, t2 - t1, t3 - t2, t4 - t3]))"
        )
        for label, run_env, n in (
            ("sqlite", env, opts.runs),
            ("yaml", yaml_env, max(2, opts.runs // 2)),
        ):
            rows = _phases(code, str(ten), run_env, n)
            for i, phase in enumerate(("imports", "load_kb", "engine_init", "first_run")):
                results[f"fresh_{phase}_{label}"] = _stats([r[i] for r in rows])

        # End to end: the command on a 10-line log.
        cmd = [sys.executable, "-m", "triage", "--no-history", str(ten)]
        results["triage_10_lines_sqlite"] = _stats(_wall(cmd, env, opts.runs))
        results["triage_10_lines_yaml"] = _stats(_wall(cmd, yaml_env, max(2, opts.runs // 2)))
        with_history = [sys.executable, "-m", "triage", str(ten)]
        results["triage_10_lines_sqlite_with_history"] = _stats(_wall(with_history, env, opts.runs))
        rg = shutil.which("rg")
        if rg:
            patterns = tmpdir / "patterns.rust"
            patterns.write_text(
                subprocess.run(
                    [sys.executable, "-m", "triage", "kb", "export-patterns"],
                    env=env,
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            )
            default = [sys.executable, "-m", "triage", str(ten)]
            rg_cmd = [rg, "-a", "-n", "--no-unicode", "-f", str(patterns), str(ten)]
            _wall(default, env, 2)  # warm: the compiled pattern cache and the page cache
            ours, theirs = [], []
            for _ in range(20):
                ours += _wall(default, env, 1)
                theirs += _wall(rg_cmd, env, 1)
            results["triage_default_10_lines_x20"] = _stats(ours)
            results["rg_same_patterns_10_lines_x20"] = _stats(theirs)
            results["triage_over_rg"] = round(
                statistics.median(ours) / statistics.median(theirs), 2
            )
        results["python_startup"] = _stats(_wall([sys.executable, "-c", "pass"], env, opts.runs))

    if opts.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{n_sigs} signatures; compiled in {results['build_s']} s")
    if "triage_over_rg" in results:
        print(f"  triage / rg start-up time: {results['triage_over_rg']}x")
    for key, value in results.items():
        if isinstance(value, dict):
            print(
                f"  {key:<38} median {value['median_ms']:>8.1f} ms   "
                f"(min {value['min_ms']:.1f}, max {value['max_ms']:.1f}, n={value['runs']})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
