"""The scan benchmark: triage against GNU grep -E -f and ripgrep on the same patterns, same run.

    python bench/run.py                 # 100 MB and 1 GB logs, 3 runs each, medians
    python bench/run.py --sizes 100 --runs 5
    python bench/run.py --request-logging off   # a server that does not log prompts
    python bench/run.py --vocabulary technical  # prompts dense in log words (a stress case)

Generates realistic vLLM logs (bench/genlog.py) into bench/data/, exports the knowledge base's
patterns with `triage kb export-patterns`, then times whole processes (wall clock, output written
to a file, never /dev/null: grep stops at the first match otherwise) and reads each child's peak
RSS from wait4. Prints MB/s, ratios against grep and ripgrep measured in the same run, scaling
with file size and with the number of patterns (the KB replicated to 2,000 patterns).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"


def timed(
    cmd: list[str],
    *,
    stdin_path: Path | None = None,
    env: dict[str, str] | None = None,
    shell_pipe: str | None = None,
) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one child process (or the largest of a pipeline)."""
    out = tempfile.TemporaryFile()
    start = time.perf_counter()
    if shell_pipe is not None:
        proc = subprocess.Popen(
            ["bash", "-c", shell_pipe], stdout=out, stderr=subprocess.DEVNULL, env=env
        )
    else:
        stdin = stdin_path.open("rb") if stdin_path else subprocess.DEVNULL
        proc = subprocess.Popen(cmd, stdin=stdin, stdout=out, stderr=subprocess.DEVNULL, env=env)
    _, _, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    out.close()
    return wall, usage.ru_maxrss / 1024.0


def median_run(label: str, runs: int, fn) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    walls, rss = [], []
    for _ in range(runs):
        w, r = fn()
        walls.append(w)
        rss.append(r)
    return statistics.median(walls), max(rss)


def interleaved(cases: dict[str, Any], runs: int) -> dict[str, list[tuple[float, float]]]:
    """Every case once per round, `runs` rounds: a slow minute of a shared machine then slows
    every program alike instead of whichever happened to run in it (ratios are also given per
    round). Returns (wall, RSS) samples per case, in round order."""
    samples: dict[str, list[tuple[float, float]]] = {label: [] for label in cases}
    for _ in range(runs):
        for label, fn in cases.items():
            samples[label].append(fn())
    return samples


def replicate_patterns(patterns: list[str], target: int) -> list[str]:
    """The KB's patterns, replicated with a distinct literal suffix until `target` patterns."""
    out = list(patterns)
    i = 0
    while len(out) < target:
        out.append(f"(?:{patterns[i % len(patterns)]}) variant{i}")
        i += 1
    return out[:target]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="100,1024", help="log sizes in MB, comma-separated")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--vocabulary",
        choices=("natural", "technical"),
        default="natural",
        help="prompt words of the generated log (technical: a stress case dense in log words)",
    )
    ap.add_argument(
        "--request-logging",
        choices=("on", "off"),
        default="on",
        help="whether the generated server logs every prompt (vLLM --enable-log-requests)",
    )
    ap.add_argument(
        "--jobs", type=int, default=2, help="also time triage --jobs N on the largest file"
    )
    args = ap.parse_args()
    DATA.mkdir(exist_ok=True)
    # A regular install compiles the package's bytecode; an editable one under
    # PYTHONDONTWRITEBYTECODE would recompile every module in every timed run.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "triage")],
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    )
    triage = [sys.executable, "-m", "triage"]
    env = {**os.environ, "TRIAGE_DB": str(DATA / "history.db"), "LC_ALL": "C"}
    pats = subprocess.run(
        [*triage, "kb", "export-patterns"], capture_output=True, text=True, check=True
    ).stdout
    ere = subprocess.run(
        [*triage, "kb", "export-patterns", "--dialect", "ere"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rust_file, ere_file = DATA / "patterns.rust", DATA / "patterns.ere"
    rust_file.write_text(pats)
    ere_file.write_text(ere)
    n_patterns = len(pats.splitlines())
    rg = shutil.which("rg")
    grep = shutil.which("grep")
    print(
        f"patterns: {n_patterns} (the knowledge base); ripgrep: {rg or 'not installed'}; runs: {args.runs}"
    )
    version = subprocess.run([*triage, "--version"], capture_output=True, text=True, env=env)
    print(version.stdout.strip())
    # warm the compiled pattern cache once (triage caches its database keyed by the signature set)
    subprocess.run(
        [
            *triage,
            "--no-history",
            "--format",
            "json",
            str(ROOT / "examples" / "vllm-kv-cache-oom.log"),
        ],
        capture_output=True,
        env=env,
        check=False,
    )
    results: dict[tuple[str, int], tuple[float, float]] = {}
    quiet = "-no-request-log" if args.request_logging == "off" else ""
    sizes = [int(s) for s in args.sizes.split(",")]
    for size in sizes:
        path = DATA / f"vllm-{size}m-{args.vocabulary}{quiet}.log"
        if not path.exists() or path.stat().st_size < (size << 20):
            print(f"generating {path} ...", flush=True)
            subprocess.run(
                [
                    sys.executable,
                    str(HERE / "genlog.py"),
                    str(path),
                    "--size-mb",
                    str(size),
                    "--vocabulary",
                    args.vocabulary,
                    "--request-logging",
                    args.request_logging,
                ],
                check=True,
            )
        mb = path.stat().st_size / 1e6
        cases = {
            "cat": lambda p=path: timed(["cat", str(p)]),
            "triage file": lambda p=path: timed(
                [*triage, "--no-history", "--format", "json", str(p)], env=env
            ),
            "triage pipe": lambda p=path: timed(
                [], env=env, shell_pipe=f"cat {p} | {' '.join(triage)} --no-history --format json -"
            ),
        }
        if args.jobs > 1 and size == max(sizes):
            cases[f"triage --jobs {args.jobs}"] = lambda p=path: timed(
                [*triage, "--no-history", "--format", "json", "--jobs", str(args.jobs), str(p)],
                env=env,
            )
        if size == max(sizes):
            # the linear-time fallback of hosts without a Hyperscan wheel (RE2 Set), forced
            cases["triage re2 fallback"] = lambda p=path: timed(
                [*triage, "--no-history", "--format", "json", str(p)],
                env={**env, "TRIAGE_ENGINE": "re2"},
            )
            # triage as installed without a C compiler: no user-text blanking, numpy line index
            cases["triage no C helpers"] = lambda p=path: timed(
                [*triage, "--no-history", "--format", "json", str(p)],
                env={**env, "TRIAGE_NO_BLANK": "1", "TRIAGE_NO_NATIVE_INDEX": "1"},
            )
        if grep:
            cases["grep -E -f"] = lambda p=path: timed(
                [grep, "-a", "-n", "-E", "-f", str(ere_file), str(p)], env=env
            )
        if rg:
            cases["rg --no-unicode -f"] = lambda p=path: timed(
                [rg, "-a", "-n", "--no-unicode", "-f", str(rust_file), str(p)], env=env
            )
        print(f"\n== {path.name}: {mb:.0f} MB ==")
        rounds = interleaved(cases, args.runs)
        for label, samples in rounds.items():
            wall = statistics.median(w for w, _ in samples)
            rss = max(r for _, r in samples)
            results[(label, size)] = (wall, rss)
            print(
                f"{label:<22} {wall:8.2f} s  {mb / wall:8.1f} MB/s  peak RSS {rss:7.1f} MiB",
                flush=True,
            )
        ratios = [
            ("triage/grep", "grep -E -f", "triage file"),
            ("triage/rg", "rg --no-unicode -f", "triage file"),
            ("triage re2 fallback/rg", "rg --no-unicode -f", "triage re2 fallback"),
            ("triage no C helpers/rg", "rg --no-unicode -f", "triage no C helpers"),
            (f"triage --jobs {args.jobs}/rg", "rg --no-unicode -f", f"triage --jobs {args.jobs}"),
        ]
        for name, baseline, subject in ratios:
            if baseline in rounds and subject in rounds:
                pooled = results[(baseline, size)][0] / results[(subject, size)][0]
                paired = statistics.median(
                    b[0] / t[0] for b, t in zip(rounds[baseline], rounds[subject], strict=True)
                )
                print(
                    f"ratio {name} speed: {pooled:.2f}x (ratio of medians); "
                    f"{paired:.2f}x (median of the {args.runs} rounds' ratios)"
                )
    if len(sizes) > 1:
        a, b = sizes[0], sizes[-1]
        grow = results[("triage file", b)][0] / results[("triage file", a)][0]
        print(f"\nscaling: triage time x{grow:.2f} for x{b / a:.1f} input ({a} MB -> {b} MB)")
    # pattern-count scaling: the KB replicated to 2,000 patterns, on the smallest file
    size = sizes[0]
    path = DATA / f"vllm-{size}m-{args.vocabulary}{quiet}.log"
    sig_dir = Path(tempfile.mkdtemp(prefix="triage-bench-sigs-"))
    _write_replicated_kb(sig_dir, 2000)
    env2 = {**env, "TRIAGE_CACHE_DIR": str(DATA / "cache-2000")}
    timed(
        [
            *triage,
            "--no-history",
            "--signatures",
            str(sig_dir),
            "--format",
            "json",
            str(ROOT / "examples" / "vllm-kv-cache-oom.log"),
        ],
        env=env2,
    )
    scaling = interleaved(
        {
            "kb": lambda: timed([*triage, "--no-history", "--format", "json", str(path)], env=env),
            "2000": lambda: timed(
                [
                    *triage,
                    "--no-history",
                    "--signatures",
                    str(sig_dir),
                    "--format",
                    "json",
                    str(path),
                ],
                env=env2,
            ),
        },
        args.runs,
    )
    wall1 = statistics.median(w for w, _ in scaling["kb"])
    wall2 = statistics.median(w for w, _ in scaling["2000"])
    rss2 = max(r for _, r in scaling["2000"])
    print(
        f"\npattern scaling on {size} MB: KB ({n_patterns} patterns) {wall1:.2f} s; "
        f"2,000 patterns {wall2:.2f} s (x{wall2 / wall1:.2f}), peak RSS {rss2:.1f} MiB"
    )
    # start-up: a 10-line log
    small = DATA / "ten-lines.log"
    small.write_text(
        "".join((ROOT / "examples" / "vllm-kv-cache-oom.log").read_text().splitlines(True)[:10])
    )
    wall, _ = median_run(
        "startup", max(5, args.runs), lambda: timed([*triage, "--no-history", str(small)], env=env)
    )
    print(f"start-up: triage on a 10-line log: {wall * 1000:.0f} ms (median)")
    shutil.rmtree(sig_dir, ignore_errors=True)


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def _write_replicated_kb(target: Path, n: int) -> None:
    """A signature directory holding the real KB plus filler signatures up to n patterns."""
    sys.path.insert(0, str(ROOT))
    import yaml

    from triage.api import load_kb

    kb = load_kb()
    count = 0
    for sig in kb.signatures:
        layer_dir = target / sig.layer
        layer_dir.mkdir(parents=True, exist_ok=True)
        data = _without_none(sig.to_dict())
        (layer_dir / f"{sig.id}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        count += len(sig.match)
    base = [p.regex for s in kb.signatures for p in s.match]
    i = 0
    (target / "engine").mkdir(exist_ok=True)
    while count < n:
        batch = [f"(?:{base[(i + k) % len(base)]}) replica{i + k}" for k in range(10)]
        sig = {
            "id": f"replica-{i}",
            "title": f"Replicated filler signature {i}",
            "layer": "engine",
            "severity": "error",
            "status": "open",
            "summary": "Filler for the pattern-count benchmark only.",
            "match": [{"regex": b} for b in batch],
            "fixes": [{"do": "none (benchmark filler)", "confidence": "lead"}],
            "provenance": {"reproduction": "bench/run.py"},
            "examples": {"match": [f"x replica{i}"], "no_match": ["x"]},
        }
        (target / "engine" / f"replica-{i}.yaml").write_text(yaml.safe_dump(sig, sort_keys=False))
        count += len(batch)
        i += 10


if __name__ == "__main__":
    main()
