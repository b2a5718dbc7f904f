"""triage lint and triage probe: seed rows caught in real-shaped configs, clean configs silent,
version-aware env/flag knowledge, the probe bundle on a machine without GPUs, and the bundle
feeding triage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from triage.api import Engine, load_kb
from triage.preflight import knobs
from triage.preflight.lint import lint_paths
from triage.preflight.model import Item, Launch
from triage.preflight.parsers import image_version, parse_file, shell_commands, size_bytes
from triage.preflight.probe import Probe, ProbeOptions, iommu_mode, write_bundle
from triage.preflight.rules import Context, knob_findings

FIX = Path(__file__).parent / "fixtures" / "preflight"
ROWS = FIX / "rows"

# row -> (engine version, [(file under bad/, signature, text on the line the finding must name)])
EXPECTED: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    "E4": (
        "0.31.0",
        [
            (f, "rust-frontend-unsupported-args", "VLLM_USE_RUST_FRONTEND")
            for f in ("launch.sh", "compose.yaml", "vllm.service")
        ],
    ),
    "E7": (
        "0.31.0",
        [
            (f, "env-var-not-read", m)
            for f in ("launch.sh", "compose.yaml", "vllm.service")
            for m in ("VLLM_MXFP4_USE_MARLIN", "VLLM_USE_FLASHINFER_MXFP4_MOE")
        ],
    ),
    "E13": (
        "0.31.0",
        [
            (f, "kv-spec-promotion-hybrid", "--disable-hybrid-kv-cache-manager")
            for f in ("launch.sh", "compose.yaml", "vllm.service")
        ],
    ),
    "E18": (
        "0.31.0",
        [
            (f, "v2-model-runner-experimental", "VLLM_USE_V2_MODEL_RUNNER")
            for f in ("launch.sh", "compose.yaml", "vllm.service")
        ],
    ),
    "E19": (
        "0.21.0",
        [
            (f, "cuda-oom-loading-weights", "VLLM_B12X_TINY_DECODE")
            for f in ("launch.sh", "compose.yaml", "vllm.service")
        ],
    ),
    "E23": (
        "0.27.0",
        [
            (f, "custom-all-reduce-env-not-read", "VLLM_DISABLE_CUSTOM_ALL_REDUCE")
            for f in ("launch.sh", "compose.yaml", "vllm.service")
        ],
    ),
    "E24": (
        "0.31.0",
        [
            (f, "cuda-oom-loading-draft-model", "--gpu-memory-utilization")
            for f in ("launch.sh", "compose.yaml", "vllm.service")
        ],
    ),
    "E26": (
        "0.31.0",
        [
            (f, "marlin-repack-tile-misaligned", "VLLM_SM70_QUANT_BACKEND")
            for f in ("launch.sh", "compose.yaml", "vllm.service")
        ],
    ),
    "E27": (
        "0.31.0",
        [
            (f, "attention-backend-config-unsupported", "--kv-cache-dtype")
            for f in ("launch.sh", "compose.yaml", "vllm.service")
        ],
    ),
    "N6": (
        "0.31.0",
        [
            ("vllm.service", "systemd-sandbox-breaks-jit", "MemoryDenyWriteExecute"),
            ("vllm.service", "config-systemd-dynamic-user-home", "DynamicUser"),
        ],
    ),
    "N7": (
        "0.31.0",
        [
            (
                "vllm.service.d/override.conf",
                "config-systemd-restrict-address-families",
                "RestrictAddressFamilies=AF_NETLINK",
            )
        ],
    ),
    "N8": (
        "0.31.0",
        [
            ("vllm.service", "memlock-limit-too-low", "LimitMEMLOCK"),
            ("compose.yaml", "memlock-limit-too-low", "memlock"),
        ],
    ),
    "C1": (
        "0.31.0",
        [
            (f, sig, m)
            for f, m in (
                ("docker-run.sh", "docker run"),
                ("compose.yaml", "vllm:"),
                ("deployment.yaml", "- name: server"),
            )
            for sig in ("config-container-shm-default", "config-container-no-gpu-request")
        ],
    ),
}


@pytest.fixture(scope="module")
def kb():  # type: ignore[no-untyped-def]
    return load_kb()


def _line_of(path: Path, marker: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if marker in line:
            return number
    raise AssertionError(f"{marker!r} not in {path}")


def _awaiting_lead(kb, signature: str) -> bool:  # type: ignore[no-untyped-def]
    sig = kb.by_id.get(signature)
    return sig is not None and not sig.config


@pytest.mark.parametrize("row", sorted(EXPECTED))
def test_seed_row_caught_with_line(kb, row: str) -> None:  # type: ignore[no-untyped-def]
    version, expected = EXPECTED[row]
    assert not any(_awaiting_lead(kb, sig) for _, sig, _ in expected), f"{row}: no config: block"
    result = lint_paths([ROWS / row / "bad"], kb.signatures, version)
    got = {
        (Path(f.file).relative_to(ROWS / row / "bad").as_posix(), f.signature, f.line)
        for f in result.findings
    }
    for file, sig, marker in expected:
        line = _line_of(ROWS / row / "bad" / file, marker)
        assert (file, sig, line) in got, f"{row}: {sig} not reported at {file}:{line}; got {got}"
    for f in result.findings:
        assert f.message and f.evidence


@pytest.mark.parametrize("row", sorted(EXPECTED))
def test_clean_launch_has_no_findings(kb, row: str) -> None:  # type: ignore[no-untyped-def]
    version, _ = EXPECTED[row]
    result = lint_paths([ROWS / row / "clean"], kb.signatures, version)
    assert result.launches, f"{row}: nothing parsed"
    assert result.findings == [], [f"{f.file}:{f.line} {f.signature}" for f in result.findings]


def test_findings_are_signatures_of_the_kb(kb) -> None:  # type: ignore[no-untyped-def]
    result = lint_paths([ROWS], kb.signatures, "0.31.0")
    assert result.findings
    for f in result.findings:
        assert f.signature in kb.by_id, f.signature


# --- version-aware knowledge -------------------------------------------------------------------


def test_knob_data_covers_five_releases_from_source() -> None:
    data = json.loads(knobs.DATA.read_text())
    assert data["generated_by"] == "scripts/extract_engine_knobs.py"
    releases = data["engines"]["vllm"]["releases"]
    assert len(releases) >= 5
    for body in releases.values():
        assert body["commit"] and "vllm/envs.py" in body["sources"]
        assert len(body["env"]) > 100 and len(body["flags"]) > 100
    # facts from the seed reports, now read off the releases' own envs.py
    assert "VLLM_MXFP4_USE_MARLIN" not in releases["0.31.0"]["env"]
    assert "VLLM_DISABLE_CUSTOM_ALL_REDUCE" not in releases["0.27.0"]["env"]
    assert "--disable-custom-all-reduce" in releases["0.27.0"]["flags"]
    assert "FLASHINFER_MLA_SPARSE_DSV4" not in releases["0.21.0"]["attention_backends"]


def _launch(*items: Item, engine: str = "vllm") -> Launch:
    return Launch(file="x.sh", name="x", line=1, kind="shell", engine=engine, items=list(items))


def test_renamed_env_var_reported_with_replacement() -> None:
    launch = _launch(Item("env", "VLLM_MM_HASHER_ALGORITHM", "sha256", "x.sh", 3))
    (finding,) = knob_findings(launch, Context("0.33.0", "test"))
    assert finding.signature == "env-var-not-read" and finding.line == 3
    assert "--mm-hasher-algorithm" in finding.message and "gone from 0.31.0" in finding.message
    assert finding.fix and "--mm-hasher-algorithm" in finding.fix
    # still read by the older release: silent there
    assert knob_findings(launch, Context("0.29.0", "test")) == []


def test_env_var_replaced_by_flag_is_named_in_lint(kb, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "run.sh"
    script.write_text("VLLM_DISABLE_CUSTOM_ALL_REDUCE=1 vllm serve m --tensor-parallel-size 2\n")
    (finding,) = lint_paths([script], kb.signatures, "0.27.0").findings
    text = " ".join([finding.message, finding.fix or "", *finding.notes])
    assert "--disable-custom-all-reduce" in text and finding.line == 1


def test_removed_and_misspelled_flags(kb) -> None:  # type: ignore[no-untyped-def]
    result = lint_paths(
        [FIX / "misc" / "api-server.sh", FIX / "misc" / "compose.yml"], kb.signatures, None
    )
    by_flag = {
        f.evidence.split()[0]: f
        for f in result.findings
        if f.signature == "vllm-unrecognized-arguments"
    }
    removed = by_flag["--calculate-kv-scales"]
    assert "gone from 0.29.0" in removed.message and removed.line == 8
    typo = by_flag["--tensor-paralel-size"]
    assert typo.fix == "Did you mean --tensor-parallel-size?" and typo.line == 16
    assert "--max_model_len" not in by_flag  # underscores are accepted like argparse does


def test_unknown_backend_name_with_closest(kb, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "run.sh"
    script.write_text("vllm serve m \\\n  --attention-backend FLASH_ATTN_V100\n")
    (f,) = [
        f
        for f in lint_paths([script], kb.signatures, "0.31.0").findings
        if f.signature == "attention-backend-invalid"
    ]
    assert f.line == 2 and f.fix and "FLASH_ATTN" in f.fix


def test_unknown_version_lowers_confidence_not_silence(kb, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "run.sh"
    script.write_text(
        "export VLLM_USE_V2_MODEL_RUNNER=1\nexport VLLM_NOT_A_REAL_KNOB=1\nvllm serve m\n"
    )
    findings = lint_paths([script], kb.signatures, None).findings
    sigs = {f.signature for f in findings}
    assert {"v2-model-runner-experimental", "env-var-not-read"} <= sigs
    unknown = next(f for f in findings if "VLLM_NOT_A_REAL_KNOB" in f.evidence)
    assert unknown.confidence == "lowered"


def test_version_from_image_tag() -> None:
    assert image_version("vllm/vllm-openai:v0.27.1") == "0.27.1"
    assert image_version("vllm/vllm-openai:latest") is None
    assert image_version("localhost:5000/vllm") is None


# --- parsers -----------------------------------------------------------------------------------


def test_shell_continuations_and_multiline_quotes() -> None:
    text = "vllm serve m \\\n  --a 1 \\\n  --hf-overrides '{\n \"x\": 1}' \\\n  --b\necho done\n"
    commands = shell_commands(text)
    assert [t.text for t in commands[0]][:4] == ["vllm", "serve", "m", "--a"]
    lines = {t.text: t.line for t in commands[0]}
    assert lines["--a"] == 2 and lines["--hf-overrides"] == 3 and lines["--b"] == 5
    assert commands[1][0].text == "echo"


def test_compose_env_file_and_interpolation() -> None:
    (launch,) = [la for la in parse_file(FIX / "misc" / "compose.yml") if la.engine]
    assert launch.image == "vllm/vllm-openai:v0.27.1"
    flags = launch.flags()
    assert flags["--model"].value == "/models/Qwen3.6-35B-A3B"
    assert flags["--tool-call-parser"].value == "qwen3_coder"
    settings = launch.settings()
    assert (
        settings["shmbytes"].value == "host" and settings["gpurequest"].value == '["0", "1"]'
    ) or settings["gpurequest"].value


def test_llama_swap_entries() -> None:
    launches = parse_file(FIX / "misc" / "llama-swap.yaml")
    (qwen,) = [la for la in launches if la.name == "qwen38-nvfp4"]
    assert qwen.engine == "vllm" and qwen.flags()["--tensor-parallel-size"].line == 9


def test_kubernetes_shm_volume_and_gpu() -> None:
    (launch,) = parse_file(ROWS / "C1" / "clean" / "deployment.yaml")
    assert launch.settings()["shmbytes"].value == str(16 << 30)
    assert launch.settings()["gpurequest"].value == "2"


def test_sizes() -> None:
    assert size_bytes("16g") == 16 << 30 and size_bytes("64M") == 64 << 20
    assert size_bytes("16Gi") == 16 << 30 and size_bytes("8388608") == 8388608
    assert size_bytes("lots") is None


def test_cli_lint_exit_codes(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from triage.preflight.cli import APPS

    runner = CliRunner()
    bad = runner.invoke(
        APPS["lint"], [str(ROWS / "E23" / "bad" / "launch.sh"), "--engine-version", "0.27.0"]
    )
    assert bad.exit_code == 1 and "launch.sh:4" in bad.output
    clean = runner.invoke(
        APPS["lint"],
        [str(ROWS / "E23" / "clean"), "--engine-version", "0.27.0", "--format", "json"],
    )
    assert clean.exit_code == 0 and json.loads(clean.output)["findings"] == []
    missing = runner.invoke(APPS["lint"], [str(tmp_path / "nope.sh")])
    assert missing.exit_code == 2


# --- probe -------------------------------------------------------------------------------------


def test_probe_runs_here_and_says_what_it_could_not_collect(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from triage.preflight.cli import APPS

    out = tmp_path / "bundle"
    res = CliRunner().invoke(APPS["probe"], ["--out", str(out), "--timeout", "10"])
    assert res.exit_code == 0, res.output
    bundle = json.loads((out / "probe.json").read_text())
    for name in (
        "versions",
        "gpu",
        "topology",
        "nvlink",
        "kernel",
        "limits",
        "shm",
        "disk",
        "container",
        "env",
    ):
        assert name in bundle["sections"]
    assert bundle["sections"]["limits"]["data"]["memlock"]["soft"] is not None
    summary = (out / "probe-summary.txt").read_text()
    assert "kernel messages:" in summary and "not collected:" in summary
    if not Path("/dev/nvidia0").exists():  # this machine: no GPU, so nvidia-smi data is missing
        assert bundle["not_collected"] and "could not collect" in res.output


def test_probe_degrades_when_every_tool_is_missing(tmp_path: Path) -> None:
    def no_tools(cmd: list[str], timeout: float) -> tuple[int | None, str, str]:
        return None, "", f"{cmd[0]} is not on PATH"

    bundle = Probe(
        ProbeOptions(
            out=tmp_path,
            environ={"VLLM_API_KEY": "sk-secret-value-123456", "NCCL_P2P_DISABLE": "1"},
        ),
        runner=no_tools,
    ).collect()
    missing = " ".join(bundle["not_collected"])
    assert "nvidia-smi is not on PATH" in missing and "kernel messages" in missing
    env = bundle["sections"]["env"]["data"]["vars"]
    assert env["VLLM_API_KEY"] == "<redacted>" and env["NCCL_P2P_DISABLE"] == "1"


def test_iommu_mode() -> None:
    assert iommu_mode("root=/dev/sda intel_iommu=on iommu=pt").startswith("passthrough")
    assert iommu_mode("intel_iommu=on").startswith("translated")
    assert iommu_mode("quiet").startswith("default")


def test_probe_bundle_node_cause_outranks_engine_symptom(tmp_path: Path) -> None:
    """Xid 31 + DMAR lines captured in the bundle outrank the engine's illegal-memory-access."""

    def no_tools(cmd: list[str], timeout: float) -> tuple[int | None, str, str]:
        return None, "", f"{cmd[0]} is not on PATH"

    opts = ProbeOptions(out=tmp_path, kernel_log=FIX / "dmesg-xid31.txt", environ={})
    bundle = Probe(opts, runner=no_tools).collect()
    _, summary = write_bundle(bundle, tmp_path)
    text = summary.read_text()
    assert "NVRM: Xid (PCI:0000:3d:00): 31" in text and "e1000e" not in text
    kb = load_kb()
    server_log = str(FIX / "server-illegal-memory.log")
    alone = Engine(kb).run([server_log])
    assert alone.hypotheses[0].layer == "engine"
    both = Engine(kb).run([str(summary), server_log])
    top = both.hypotheses[0]
    assert top.layer == "node", [h.signature for h in both.hypotheses]
    assert any(e.input == str(summary) for e in top.evidence)
    engine_rank = next(
        h.rank for h in both.hypotheses if h.signature == "cuda-illegal-memory-access"
    )
    assert top.rank < engine_rank


def test_clean_probe_summary_is_silent(tmp_path: Path) -> None:
    def no_tools(cmd: list[str], timeout: float) -> tuple[int | None, str, str]:
        return None, "", f"{cmd[0]} is not on PATH"

    bundle = Probe(ProbeOptions(out=tmp_path, environ={}), runner=no_tools).collect()
    _, summary = write_bundle(bundle, tmp_path)
    assert Engine(load_kb()).run([str(summary)]).hypotheses == []


def test_p2p_summary_from_gpu_run() -> None:
    from triage.preflight.p2p import p2p_check, summary_lines

    result = json.loads((FIX / "p2p-h200x2.json").read_text())  # real output, 2x H200
    lines = summary_lines(result)
    assert "all pairs clean" in lines[0] and len(lines) == 3
    local = p2p_check(mib=1, timeout_s=5)  # no torch or no GPU here: reported, never raised
    assert local["ok"] in (None, True, False)


CONTAINER_EXPORT = """#!/usr/bin/env bash
# seed row E7 in a container launch: the kernel switches exported in the script's own shell
set -euo pipefail
export VLLM_MXFP4_USE_MARLIN=1
export VLLM_USE_FLASHINFER_MXFP4_MOE=1
docker run --gpus all --ipc=host -e VLLM_USE_FLASHINFER_MXFP4_MOE \\
  vllm/vllm-openai:v0.31.0 --model openai/gpt-oss-120b --tensor-parallel-size 8
"""


def test_exported_but_not_passed_into_the_container(kb, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """E7 through `docker run`: the variable exported without `-e` never reaches the engine, and
    the image's release does not read it either: both facts are reported, at the export's line.
    The one passed with a bare `-e NAME` takes the shell's value and gets only the release fact."""
    script = tmp_path / "launch.sh"
    script.write_text(CONTAINER_EXPORT)
    found = {(f.rule, f.evidence, f.line) for f in lint_paths([script], kb.signatures).findings}
    # the release fact comes from the knob data, or from the KB's own check for these names
    release = ("env-unknown", "kb-config")
    assert ("env-not-passed", "VLLM_MXFP4_USE_MARLIN=1", 4) in found
    assert any(f == (r, "VLLM_MXFP4_USE_MARLIN=1", 4) for r in release for f in found)
    assert any(f == (r, "VLLM_USE_FLASHINFER_MXFP4_MOE=1", 6) for r in release for f in found)
    assert not any(r == "env-not-passed" and "FLASHINFER" in e for r, e, _ in found)


def test_near_miss_passed_or_not_in_a_container_is_not_reported(kb, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    passed = tmp_path / "passed.sh"
    passed.write_text(
        "export VLLM_MXFP4_USE_MARLIN=1\n"
        "docker run --gpus all -e VLLM_MXFP4_USE_MARLIN=1 vllm/vllm-openai:v0.31.0 --model m\n"
    )
    host = tmp_path / "host.sh"  # no container: the export reaches the engine
    host.write_text("export VLLM_MXFP4_USE_MARLIN=1\nvllm serve m\n")
    for path in (passed, host):
        rules = {f.rule for f in lint_paths([path], kb.signatures, "0.31.0").findings}
        assert "env-not-passed" not in rules and rules & {"env-unknown", "kb-config"}
