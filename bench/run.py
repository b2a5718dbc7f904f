"""The scan benchmark: triage against GNU grep -E -f and ripgrep on the same patterns, same run.

    python bench/run.py                 # 100 MB and 1 GB logs, 3 runs each, medians
    python bench/run.py --sizes 100 --runs 5
    python bench/run.py --request-logging off   # a server that does not log prompts
    python bench/run.py --vocabulary technical  # prompts dense in log words (a stress case)
    python bench/run.py --real-only --real-mb 100  # only the failure-dense real-log case

The real-log case (`--real-mb`, default 100) concatenates the repository's own real excerpts
(corpus/*/*.log and examples/*.log), shuffled by file with a fixed seed and repeated until the
size is reached: failure-dense text, as a failing node's journal is. There triage runs its default
command line (history on, written under a temporary XDG_DATA_HOME) beside `--no-history`, and
Hyperscan alone (the exported patterns compiled once, the file scanned in 1 MiB chunks: the
scanner's ceiling) is timed on each log, with triage's share of it.

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
    ap.add_argument(
        "--real-mb", type=int, default=100, help="size of the real-log case in MB (0: skip it)"
    )
    ap.add_argument(
        "--real-only", action="store_true", help="only the real-log case (no generated logs)"
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
    if args.real_mb > 0:
        real = build_real_log(DATA / f"real-{args.real_mb}m.log", args.real_mb)
        bench_real_log(real, triage, env, rust_file, ere_file, rg, grep, args)
    if args.real_only:
        return
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
        hs = hyperscan_alone(path, rust_file, env)
        if hs is not None:
            print(
                f"{'hyperscan alone':<22} {hs:8.2f} s  {mb / hs:8.1f} MB/s  (scan only, in process)"
            )
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
        if hs is not None:
            share = hs / results[("triage file", size)][0]
            print(f"triage's share of hyperscan alone: {share:.1%}")
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


REAL_SEED = 20261201


def build_real_log(path: Path, size_mb: int) -> Path:
    """corpus/*/*.log and examples/*.log concatenated, shuffled by file (a fixed seed per
    repetition), repeated to at least size_mb MB: the same bytes on every machine."""
    import random

    files = sorted(ROOT.glob("corpus/*/*.log")) + sorted(ROOT.glob("examples/*.log"))
    blobs = [f.read_bytes() for f in files]
    blobs = [b if b.endswith(b"\n") else b + b"\n" for b in blobs]
    target = size_mb * 1_000_000
    marker = path.with_suffix(".key")
    key = f"{REAL_SEED} {target} " + ",".join(
        f"{f.relative_to(ROOT)}:{len(b)}" for f, b in zip(files, blobs, strict=True)
    )
    import hashlib

    digest = hashlib.sha256(key.encode()).hexdigest()
    if path.exists() and marker.exists() and marker.read_text() == digest:
        return path
    print(f"building {path} from {len(files)} real logs ...", flush=True)
    written = 0
    repetition = 0
    with path.open("wb") as out:
        while written < target:
            order = list(range(len(blobs)))
            random.Random(REAL_SEED + repetition).shuffle(order)
            for i in order:
                out.write(blobs[i])
                written += len(blobs[i])
            repetition += 1
    marker.write_text(digest)
    return path


HYPERSCAN_ALONE = """
import sys, time
from pathlib import Path
from triage.scanners import make_scanner
patterns = Path(sys.argv[2]).read_text().splitlines()
scanner = make_scanner(patterns)  # compiled once (triage's cache), outside the timing
matches = 0
start = time.perf_counter()
with open(sys.argv[1], "rb") as fh:
    rest = b""
    while chunk := fh.read(1 << 20):
        chunk = rest + chunk
        cut = chunk.rfind(b"\\n") + 1
        if cut == 0:
            rest = chunk
            continue
        rest = chunk[cut:]
        matches += len(scanner.scan(chunk[:cut]))
    if rest:
        matches += len(scanner.scan(rest))
print(time.perf_counter() - start, matches, scanner.name)
"""


def hyperscan_alone(path: Path, patterns: Path, env: dict[str, str]) -> float | None:
    """Seconds Hyperscan alone takes over the file (median of 3, in one process each): the
    exported patterns compiled once through triage's scanner (its cache), the file scanned in
    1 MiB chunks cut at line breaks, every match reported to a Python callback as triage's are."""
    walls = []
    for _ in range(3):
        proc = subprocess.run(
            [sys.executable, "-c", HYPERSCAN_ALONE, str(path), str(patterns)],
            capture_output=True,
            text=True,
            env={**env, "PYTHONPATH": str(ROOT)},
            check=False,
        )
        if proc.returncode != 0 or "hyperscan" not in proc.stdout:
            return None
        walls.append(float(proc.stdout.split()[0]))
    return statistics.median(walls)


def bench_real_log(
    path: Path,
    triage: list[str],
    env: dict[str, str],
    rust_file: Path,
    ere_file: Path,
    rg: str | None,
    grep: str | None,
    args: argparse.Namespace,
) -> None:
    """The failure-dense case: triage as users run it (history on) and with --no-history,
    against ripgrep and grep, interleaved; then Hyperscan alone."""
    mb = path.stat().st_size / 1e6
    data_home = Path(tempfile.mkdtemp(prefix="triage-bench-xdg-"))
    default_env = {k: v for k, v in env.items() if k != "TRIAGE_DB"}
    default_env["XDG_DATA_HOME"] = str(data_home)
    cases = {
        "cat": lambda: timed(["cat", str(path)]),
        "triage (default)": lambda: timed([*triage, str(path)], env=default_env),
        "triage --no-history": lambda: timed([*triage, "--no-history", str(path)], env=env),
        "triage --format json": lambda: timed(
            [*triage, "--no-history", "--format", "json", str(path)], env=env
        ),
    }
    if args.jobs > 1:
        cases[f"triage --jobs {args.jobs}"] = lambda: timed(
            [*triage, "--no-history", "--jobs", str(args.jobs), str(path)], env=env
        )
    if rg:
        cases["rg --no-unicode -f"] = lambda: timed(
            [rg, "-a", "-n", "--no-unicode", "-f", str(rust_file), str(path)], env=env
        )
    if grep:
        cases["grep -E -f"] = lambda: timed(
            [grep, "-a", "-n", "-E", "-f", str(ere_file), str(path)], env=env
        )
    print(f"\n== {path.name}: {mb:.0f} MB of real logs (corpus + examples), failure-dense ==")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rounds = interleaved(cases, args.runs)
    medians = {}
    for label, samples in rounds.items():
        wall = statistics.median(w for w, _ in samples)
        rss = max(r for _, r in samples)
        medians[label] = wall
        print(
            f"{label:<22} {wall:8.2f} s  {mb / wall:8.1f} MB/s  peak RSS {rss:7.1f} MiB", flush=True
        )
    json_size = _report_size([*triage, "--no-history", "--format", "json", str(path)], env)
    print(f"JSON report: {json_size / 1e6:.2f} MB for {mb:.0f} MB of input")
    for subject in ("triage (default)", "triage --no-history", f"triage --jobs {args.jobs}"):
        for baseline in ("rg --no-unicode -f", "grep -E -f"):
            if subject in rounds and baseline in rounds:
                pooled = medians[baseline] / medians[subject]
                paired = statistics.median(
                    b[0] / t[0] for b, t in zip(rounds[baseline], rounds[subject], strict=True)
                )
                print(
                    f"ratio {subject} / {baseline.split()[0]} speed: {pooled:.2f}x "
                    f"(ratio of medians); {paired:.2f}x (median of the rounds' ratios)"
                )
    if f"triage --jobs {args.jobs}" in medians:
        gain = medians["triage --no-history"] / medians[f"triage --jobs {args.jobs}"]
        print(f"--jobs {args.jobs} speed-up over one job: {gain:.2f}x")
    hs = hyperscan_alone(path, rust_file, env)
    if hs is not None:
        print(f"{'hyperscan alone':<22} {hs:8.2f} s  {mb / hs:8.1f} MB/s  (scan only, in process)")
        for subject in ("triage (default)", "triage --no-history"):
            print(f"{subject}'s share of hyperscan alone: {hs / medians[subject]:.1%}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    shutil.rmtree(data_home, ignore_errors=True)


def _report_size(cmd: list[str], env: dict[str, str]) -> int:
    proc = subprocess.run(cmd, env=env, capture_output=True, check=False)
    return len(proc.stdout)


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
        filler = {
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
        (target / "engine" / f"replica-{i}.yaml").write_text(yaml.safe_dump(filler, sort_keys=False))
        count += len(batch)
        i += 10


if __name__ == "__main__":
    main()
