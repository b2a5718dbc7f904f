"""A user's first minutes: a missing knowledge base is loud on every command, and the command line
keeps the conventions of grep, rg and journalctl (colour, quiet, version, completion, progress,
SIGPIPE, binary input, journalctl's markers, its own outputs in a run directory)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "vllm-kv-cache-oom.log"
HEALTHY = ROOT / "corpus" / "healthy" / "vllm-0.10-qwen2-7b-a100-startup-wrapped.log"
SHM_CASE = ROOT / "corpus" / "node" / "nccl-tests-shm-segment-extend-failed.log"
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def run(
    *args: str,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    cwd: Path = ROOT,
    timeout: float = 120,
) -> subprocess.CompletedProcess[bytes]:
    full_env = {**os.environ, **(env or {})}
    for name in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE"):
        if name not in (env or {}):
            full_env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "triage", *args],
        input=stdin,
        capture_output=True,
        check=False,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
    )


def in_pty(command: str, cols: int = 80, env: dict[str, str] | None = None) -> str:
    """What a person sees on a terminal of `cols` columns (util-linux `script`)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("COLUMNS", None)
    for name in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE"):
        if name not in (env or {}):
            full_env.pop(name, None)
    full_env.setdefault("TERM", "xterm-256color")
    proc = subprocess.run(
        ["script", "-qec", f"stty cols {cols} rows 50; {command}", "/dev/null"],
        capture_output=True,
        check=False,
        env=full_env,
        cwd=ROOT,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    return proc.stdout.decode(errors="replace").replace("\r\n", "\n")


needs_script = pytest.mark.skipif(shutil.which("script") is None, reason="util-linux script")
TRIAGE = f"{sys.executable} -m triage"


# -- a missing or empty knowledge base ------------------------------------------------------------


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    shutil.copy(EXAMPLE, run_dir / "server.log")
    launch = tmp_path / "launch.sh"
    launch.write_text("vllm serve m --gpu-memory-utilization 0.9\n")
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps(
            {
                "action": "opened",
                "issue": {"number": 1, "title": "t", "body": EXAMPLE.read_text(), "user": {}},
                "repository": {"full_name": "o/r"},
            }
        )
    )
    return {
        "triage FILE": [str(EXAMPLE)],
        "comment": ["comment", str(EXAMPLE)],
        "run": ["run", str(run_dir)],
        "serve": ["serve", "--dry-run", "--bot-login", "bot", "--port", "0"],
        "bot": ["bot", "github", "--event", str(event), "--dry-run", "--bot-login", "bot"],
        "watch": ["watch", str(tmp_path), "--once", "--dry-run"],
        "kb lint": ["kb", "lint", "--fast"],
        "kb eval": ["kb", "eval", str(ROOT / "corpus" / "healthy")],
        "kb stats": ["kb", "stats"],
        "kb search": ["kb", "search", "cache blocks"],
        "kb export-patterns": ["kb", "export-patterns"],
        "kb applies": ["kb", "applies", "--only", "engine-core-init-failed"],
        "lint": ["lint", str(launch)],
        "--version": ["--version"],
    }


@pytest.mark.parametrize("kind", ["missing", "empty", "no-yaml"])
def test_every_command_stops_loudly_without_a_knowledge_base(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "sigs"
    if kind != "missing":
        target.mkdir()
    if kind == "no-yaml":
        (target / "engine").mkdir()
        (target / "engine" / "README.txt").write_text("not a signature\n")
    env = {"TRIAGE_SIGNATURES": str(target), "TRIAGE_WEBHOOK_SECRET": "s" * 16}
    for name, args in _commands(tmp_path).items():
        proc = run(*args, env=env, timeout=60)
        err = proc.stderr.decode()
        assert proc.returncode == 2, (name, proc.returncode, err, proc.stdout[-300:])
        lines = err.strip().splitlines()
        assert len(lines) == 1, (name, err)
        assert str(target) in lines[0] and "internal error" not in lines[0], (name, err)


def test_an_installed_package_without_its_data_is_loud(tmp_path: Path) -> None:
    """The layout of a wheel whose `triage/data/signatures/` is gone (no checkout around it)."""
    site = tmp_path / "site-packages"
    shutil.copytree(
        ROOT / "triage", site / "triage", ignore=shutil.ignore_patterns("__pycache__", "signatures")
    )
    expected = site / "triage" / "data" / "signatures"
    env = {"PYTHONPATH": str(site), "TRIAGE_WEBHOOK_SECRET": "s" * 16}
    env_clean = {k: v for k, v in os.environ.items() if k != "TRIAGE_SIGNATURES"}
    for name, args in _commands(tmp_path).items():
        proc = subprocess.run(
            [sys.executable, "-m", "triage", *args],
            capture_output=True,
            check=False,
            env={**env_clean, **env},
            cwd=tmp_path,
            timeout=60,
        )
        err = proc.stderr.decode().strip()
        assert proc.returncode == 2, (name, err)
        assert err == f"triage: {expected}: no signature directory (the knowledge base is missing)"


def test_a_signatures_typo_is_loud_and_nothing_is_cached(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    typo = tmp_path / "signatuers"
    proc = run("--signatures", str(typo), str(EXAMPLE), env={"TRIAGE_CACHE_DIR": str(cache)})
    assert proc.returncode == 2
    assert proc.stderr.decode().strip() == (
        f"triage: {typo}: no signature directory (the knowledge base is missing)"
    )
    assert not cache.exists() or not list(cache.glob("kb-*.db"))


def test_version_names_the_knowledge_base() -> None:
    from triage.kb.paths import default_signature_dir, signature_files

    for flag in ("--version", "-V"):
        proc = run(flag)
        assert proc.returncode == 0
        out = proc.stdout.decode()
        count = len(signature_files(default_signature_dir()))
        assert re.search(rf"knowledge base: {count} signatures, digest [0-9a-f]{{12}}", out), out
        assert "scanner:" in out


def _small_corpus(tmp_path: Path, wrong: bool) -> Path:
    corpus = tmp_path / "corpus"
    for rel in ("node/nccl-tests-shm-segment-extend-failed", "healthy/" + HEALTHY.stem):
        for suffix in (".log", ".expected.yaml"):
            src = ROOT / "corpus" / (rel + suffix)
            dest = corpus / (rel + suffix)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dest)
    if wrong:
        exp = corpus / "node" / "nccl-tests-shm-segment-extend-failed.expected.yaml"
        exp.write_text(re.sub(r"top: \S+", "top: kv-cache-no-memory", exp.read_text(), count=1))
    return corpus


def test_kb_eval_gates_on_a_threshold(tmp_path: Path) -> None:
    good = run("kb", "eval", str(_small_corpus(tmp_path / "a", wrong=False)), "--min-top1", "100")
    assert good.returncode == 0, good.stdout.decode() + good.stderr.decode()
    bad = run("kb", "eval", str(_small_corpus(tmp_path / "b", wrong=True)), "--min-top1", "90")
    assert bad.returncode == 1
    assert "below the gate" in bad.stderr.decode()
    plain = run("kb", "eval", str(_small_corpus(tmp_path / "c", wrong=True)))
    assert plain.returncode == 0  # without a gate it only measures
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run("kb", "eval", str(empty)).returncode == 2


# -- help, colour, quiet, completion ------------------------------------------------------------


@needs_script
@pytest.mark.parametrize(
    "command", ["--help", "kb --help", "kb search --help", "comment --help", "lint --help"]
)
def test_help_fits_an_80_column_terminal(command: str) -> None:
    screen = in_pty(f"{TRIAGE} {command}", cols=80)
    lines = _SGR.sub("", screen).splitlines()
    assert len(lines) > 5, screen
    too_long = [line for line in lines if len(line) > 80]
    assert not too_long, too_long


def test_kb_help_lists_every_kb_subcommand() -> None:
    from triage.cli import KB_SUBCOMMANDS

    out = run("kb", "--help", env={"COLUMNS": "100"}).stdout.decode()
    for name in KB_SUBCOMMANDS:
        assert re.search(rf"│ {re.escape(name)}\s", out), (name, out)


@needs_script
@pytest.mark.parametrize(
    ("env", "flag", "coloured"),
    [
        ({}, "", True),
        ({"NO_COLOR": "1"}, "", False),
        ({"NO_COLOR": ""}, "", True),  # an empty NO_COLOR is ignored (no-color.org)
        ({"TERM": "dumb"}, "", False),
        ({}, "--color=never", False),
        ({}, "--no-color", False),
        ({"NO_COLOR": "1"}, "--color=always", True),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, "", False),  # NO_COLOR wins under auto
    ],
)
def test_colour_on_a_terminal(env: dict[str, str], flag: str, coloured: bool) -> None:
    screen = in_pty(f"{TRIAGE} --no-history {flag} {EXAMPLE}", cols=120, env=env)
    assert "kv-cache-no-memory" in screen
    assert bool(_SGR.search(screen)) is coloured, screen[:400]


@pytest.mark.parametrize(
    ("env", "args", "coloured"),
    [
        ({}, (), False),
        ({"FORCE_COLOR": "1"}, (), True),
        ({"CLICOLOR_FORCE": "1"}, (), True),
        ({"FORCE_COLOR": "0"}, (), False),
        ({}, ("--color", "always"), True),
        ({}, ("--color",), True),
        ({"FORCE_COLOR": "1"}, ("--color=never",), False),
    ],
)
def test_colour_in_a_pipe(env: dict[str, str], args: tuple[str, ...], coloured: bool) -> None:
    proc = run("--no-history", *args, str(EXAMPLE), env=env)
    assert proc.returncode == 1
    assert bool(_SGR.search(proc.stdout.decode())) is coloured


def test_evidence_text_is_readable_on_light_and_dark_themes() -> None:
    out = run("--no-history", "--color=always", str(EXAMPLE)).stdout.decode()
    line = next(x for x in out.splitlines() if "No available memory for the cache blocks" in x)
    # The log's own text is in the terminal's foreground colour: no white (37) and no faint (2)
    # around it, which vanish on a light or a dark background.
    tail = line[line.index("ValueError") - 8 :]
    assert "\x1b[37m" not in line and "\x1b[2m" not in tail, repr(line)


def test_quiet_prints_nothing_and_keeps_the_exit_status() -> None:
    failing = run("-q", "--no-history", str(EXAMPLE))
    assert (failing.returncode, failing.stdout) == (1, b"")
    healthy = run("--quiet", "--no-history", str(HEALTHY))
    assert (healthy.returncode, healthy.stdout) == (0, b"")


def test_bash_completion_offers_options_subcommands_and_values(tmp_path: Path) -> None:
    script = run("--completion", "bash").stdout.decode()
    path = tmp_path / "triage.bash"
    path.write_text(script)

    def complete(*words: str) -> list[str]:
        line = " ".join(words)
        probe = (
            f"source {path}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _triage; "
            'printf "%s\\n" "${COMPREPLY[@]}"'
        )
        proc = subprocess.run(
            ["bash", "-c", probe], capture_output=True, check=True, cwd=ROOT, timeout=30
        )
        return proc.stdout.decode().split()

    assert "--format" in complete("triage", "--for")
    assert set(complete("triage", "--format", "")) == {
        *("text", "json", "markdown", "jsonl"),
        *("prom", "gha", "junit"),  # triage/render/prom.py, gha.py, junit.py (issue 21)
    }
    assert {"kb", "comment", "history"} <= set(complete("triage", ""))
    assert {"lint", "eval", "search", "build"} <= set(complete("triage", "kb", ""))
    assert set(complete("triage", "--color", "")) == {"auto", "always", "never"}


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_completion_scripts(shell: str, tmp_path: Path) -> None:
    proc = run("--completion", shell)
    assert proc.returncode == 0
    text = proc.stdout.decode()
    assert "--format" in text or "-l format" in text
    assert "kb" in text
    binary = shutil.which(shell)
    if binary is None:
        pytest.skip(f"{shell} is not installed: the script is generated but not parsed")
    path = tmp_path / f"triage.{shell}"
    path.write_text(text)
    check = subprocess.run([binary, "-n", str(path)], capture_output=True, check=False)
    assert check.returncode == 0, check.stderr.decode()


# -- progress, SIGPIPE, binary input, journalctl markers, own outputs ------------------------------


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 40 MB healthy log: large enough for the progress line, small enough for CI."""
    path = tmp_path_factory.mktemp("big") / "big.log"
    chunk = b"".join(p.read_bytes() for p in sorted((ROOT / "corpus" / "healthy").glob("*.log")))
    with path.open("wb") as fh:
        written = 0
        while written < 40 << 20:
            fh.write(chunk)
            written += len(chunk)
    return path


@needs_script
def test_progress_line_on_a_terminal_only(big_log: Path) -> None:
    screen = in_pty(f"{TRIAGE} --no-history {big_log} >/dev/null", cols=120)
    assert re.search(r"\d+(\.\d+)? MB/s", screen), screen[-500:]
    quiet = in_pty(f"{TRIAGE} --no-history -q {big_log}", cols=120)
    assert "MB/s" not in quiet
    piped = run("--no-history", str(big_log))
    assert piped.stderr == b""


def test_a_closed_pipe_ends_like_grep_not_with_failure(big_log: Path) -> None:
    for log in (HEALTHY, EXAMPLE, big_log):
        proc = subprocess.Popen(
            [sys.executable, "-m", "triage", "--no-history", str(log)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        err = proc.stderr.read()
        code = proc.wait(timeout=120)
        # Killed by SIGPIPE, as grep is: the shell sees 141; never 1 ("failure found").
        assert code == -13, (log, code, err)
        assert err == b""


def test_binary_input_is_skipped(tmp_path: Path) -> None:
    blob = tmp_path / "core.bin"
    blob.write_bytes(os.urandom(3000))
    alone = run("--no-history", str(blob))
    assert alone.returncode == 2
    assert alone.stderr.decode().strip() == f"triage: {blob}: binary file, skipped"
    beside = run("--no-history", str(blob), str(EXAMPLE))
    assert beside.returncode == 1
    assert "binary file, skipped" in beside.stdout.decode()
    # A log with a stray NUL byte stays a log (near miss).
    nul = tmp_path / "nul.log"
    nul.write_bytes(EXAMPLE.read_bytes().replace(b"INFO", b"IN\0FO", 1))
    assert run("--no-history", str(nul)).returncode == 1


def test_journalctl_no_entries_is_no_input() -> None:
    for text in (b"-- No entries --\n", b"-- Journal begins at Mon 2026-11-30 10:00:01 UTC. --\n"):
        proc = run("--no-history", stdin=text)
        assert proc.returncode == 2, proc.stdout
        assert "no log entries" in proc.stderr.decode()
    # A journal whose entries follow its marker line is a log (near miss).
    marker = b"-- Journal begins at Mon 2026-11-30 10:00:01 UTC. --\n"
    proc = run("--no-history", stdin=marker + EXAMPLE.read_bytes())
    assert proc.returncode == 1


def test_a_run_directory_does_not_cite_its_own_report(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(EXAMPLE, run_dir / "server.log")
    assert run("run", str(run_dir)).returncode in (0, 1)
    assert (run_dir / "triage.json").exists()
    proc = run("--no-history", "-f", "json", str(run_dir))
    report = json.loads(proc.stdout)
    assert [i["name"] for i in report["inputs"]] == [str(run_dir / "server.log")]


def test_each_evidence_line_once_with_all_its_roles() -> None:
    proc = run("--no-history", "-f", "json", str(SHM_CASE))
    hyp = json.loads(proc.stdout)["hypotheses"][0]
    lines = [(e["input"], e["line"]) for e in hyp["evidence"]]
    assert len(lines) == len(set(lines))
    both = [e for e in hyp["evidence"] if len(e["roles"]) > 1]
    assert both and both[0]["roles"][0] == both[0]["role"]
    text = run("--no-history", str(SHM_CASE)).stdout.decode()
    shown = re.findall(r":(\d+)(?: \[[^\]]+\])?(?: \(x\d+\))?: ", text.split("\n#2")[0])
    assert len(shown) == len(set(shown)), text
    assert "[decisive, evidence]" in text


def test_one_line_is_singular(tmp_path: Path) -> None:
    one = tmp_path / "one.log"
    one.write_text("INFO all good\n")
    out = run("--no-history", str(one)).stdout.decode()
    assert "(1 line, " in out and "1 lines" not in out


def test_pytest_prints_its_summary_line() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    addopts = str(config["tool"]["pytest"]["ini_options"].get("addopts", ""))
    assert "-q" not in addopts.split()  # the README's `pytest -q` would become -qq: no summary
