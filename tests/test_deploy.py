"""The bot's deployment paths, as far as this machine can run them: the systemd unit parses, the
container recipe runs the commands docs/deploy.md shows, the GitHub workflow installs triage's own
pinned release and checks its knowledge base, and the health endpoint answers on a real server."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

UNIT = ROOT / "deploy" / "systemd" / "triage-serve.service"
CONTAINERFILE = ROOT / "deploy" / "container" / "Containerfile"
COMPOSE = ROOT / "deploy" / "container" / "compose.yaml"
WORKFLOW = ROOT / "examples" / "github-workflow.yml"
DOCS = (ROOT / "docs" / "deploy.md").read_text()


def _serve_help() -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "triage", "serve", "--help"],
        capture_output=True,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    return proc.stdout.decode()


def _options(command: str) -> list[str]:
    return re.findall(r"(--[a-z][a-z-]+)", command)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze")
def test_systemd_unit_verifies(tmp_path: Path) -> None:
    triage = Path(sys.executable).with_name("triage")
    if not triage.exists():
        pytest.skip("no triage console script next to the interpreter")
    unit = UNIT.read_text().replace("/opt/triage/venv/bin/triage", str(triage))
    unit = unit.replace("EnvironmentFile=/etc", "EnvironmentFile=-/etc")  # may be absent here
    path = tmp_path / UNIT.name
    path.write_text(unit)
    proc = subprocess.run(
        ["systemd-analyze", "verify", str(path)], capture_output=True, check=False, timeout=60
    )
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr.decode()


def test_unit_and_container_run_serve_options_that_exist() -> None:
    help_text = _serve_help()
    exec_start = next(
        line.split("=", 1)[1]
        for line in UNIT.read_text().splitlines()
        if line.startswith("ExecStart=")
    )
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", CONTAINERFILE.read_text(), re.M).group(1))  # type: ignore[union-attr]
    for command in (exec_start, " ".join(cmd)):
        assert "serve" in command
        for option in _options(command):
            assert option in help_text, (option, command)


def test_container_recipe_matches_the_docs() -> None:
    recipe = CONTAINERFILE.read_text()
    shown = [line.strip() for line in DOCS.splitlines() if line.startswith("    docker ")]
    in_recipe = [line[1:].strip() for line in recipe.splitlines() if line.startswith("#   docker")]
    assert shown[:2] == in_recipe, (shown, in_recipe)
    assert "pip install --no-cache-dir /src" in recipe  # non-editable: it carries the knowledge
    assert "triage --version" in recipe  # fails the build when the knowledge base is missing
    assert "/healthz" in recipe and "/healthz" in DOCS
    compose = yaml.safe_load(COMPOSE.read_text())
    assert compose["services"]["triage"]["build"]["dockerfile"] == "deploy/container/Containerfile"
    assert (
        COMPOSE.parent / compose["services"]["triage"]["build"]["context"] / "pyproject.toml"
    ).exists()
    assert "docker compose -f deploy/container/compose.yaml up -d" in DOCS


def test_workflow_installs_triages_own_pinned_release() -> None:
    text = WORKFLOW.read_text()
    flow = yaml.safe_load(text)
    spec = flow["env"]["TRIAGE_SPEC"]
    assert re.fullmatch(r"llm-triage(==\d+\.\d+\.\d+| @ git\+https://\S+@v?\d+\.\d+\.\d+)", spec)
    assert "github.repository" not in text  # the user's repository is not triage
    steps = [s.get("run", "") for s in flow["jobs"]["triage"]["steps"]]
    install = next(i for i, s in enumerate(steps) if "pip install" in s)
    check = next(i for i, s in enumerate(steps) if s.strip().startswith("triage --version"))
    bot = next(i for i, s in enumerate(steps) if "triage bot github" in s)
    assert install < check < bot


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_health_endpoint_answers(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "TRIAGE_WEBHOOK_SECRET": "x" * 32, "TRIAGE_DB": str(tmp_path / "h.db")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "triage",
            "serve",
            "--dry-run",
            "--bot-login",
            "bot",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
                    assert resp.status == 200
                    break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
                assert time.monotonic() < deadline, "the server did not answer /healthz"
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
