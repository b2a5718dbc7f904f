"""Pasted snapshots: each reader on real pasted text from the corpus, each rule against the healthy
line it must not fire on, a paste that mixes snapshots with a server log, and the healthy
snapshots silent."""

from __future__ import annotations

import io
from typing import Any

import pytest

from tests.conftest import ROOT
from triage.api import Engine, InputSpec
from triage.models import Report

CORPUS = ROOT / "corpus"


def run_text(engine: Engine, text: str, name: str = "paste.txt") -> Report:
    spec = InputSpec(name, None, io.BytesIO(text.encode()))
    return engine.run_inputs([spec])


def run_case(engine: Engine, relpath: str) -> Report:
    return engine.run([str(CORPUS / relpath)])


def signatures(report: Report) -> list[str]:
    return [h.signature for h in report.hypotheses]


# ---------------------------------------------------------------- readers


def test_ulimit_reader_reads_every_limit(engine: Engine) -> None:
    facts = run_case(engine, "node/snapshot-ulimit-memlock-64-ucx-ibv-create-cq.log").facts
    ulimit = facts["ulimit"]
    assert ulimit["memlock_kb"] == 64
    assert ulimit["nofile"] == 1024
    assert ulimit["stack_kb"] == 8192
    assert ulimit["virtual_memory_kb"] == "unlimited"
    assert ulimit["line"] == 2  # the first row of the block, under the `ulimit -a` prompt


def test_ulimit_reader_newer_bash_layout_and_unlimited(engine: Engine) -> None:
    # bash 5 adds the -R row and widens the label column; the marker text after a value is pasted
    facts = run_case(engine, "node/snapshot-ulimit-nofile-1024-mi300-vllm-tp8.log").facts
    assert facts["ulimit"]["rttime_us"] == "unlimited"
    assert facts["ulimit"]["nofile"] == 1024
    assert facts["ulimit"]["memlock_kb"] == 264154548
    healthy = run_case(engine, "healthy/snapshot-ulimit-memlock-unlimited-rdma-host.log").facts
    assert healthy["ulimit"]["memlock_kb"] == "unlimited"
    assert healthy["ulimit"]["nofile"] == 4096


def test_one_ulimit_like_row_is_not_a_snapshot(engine: Engine) -> None:
    facts = run_text(engine, "open files                      (-n) 1024\n").facts
    assert "ulimit" not in facts


def test_nvidia_smi_q_reader_knows_which_pending_is_which(engine: Engine) -> None:
    gpus = run_case(engine, "healthy/snapshot-nvidia-smi-q-h200-full.log").facts["gpus"]
    assert len(gpus) == 1
    gpu = gpus[0]
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["bus_id"] == "00000000:00:06.0"
    assert gpu["persistence_mode"] == "Enabled"
    assert gpu["mig_mode"] == "Disabled"  # MIG Mode > Current, not ECC Mode > Current (Enabled)
    assert gpu["ecc_uncorrected"] == 0
    assert gpu["retired_pages_pending"] == "N/A"
    assert gpu["remapped_rows_pending"] == "No"
    assert gpu["remapping_failure"] == "No"


def test_nvidia_smi_q_reader_older_driver(engine: Engine) -> None:
    gpu = run_case(engine, "healthy/snapshot-nvidia-smi-q-gtx780.log").facts["gpus"][0]
    assert gpu["name"] == "GeForce GTX 780"
    assert gpu["persistence_mode"] == "Disabled"
    assert gpu["mig_mode"] == "N/A"
    assert "remapped_rows_pending" not in gpu  # the stored excerpt ends before those sections


def test_nvidia_smi_table_reader(engine: Engine) -> None:
    gpu = run_case(engine, "healthy/snapshot-nvidia-smi-table-h200.log").facts["gpus"][0]
    assert gpu == {
        "index": 0,
        "bus_id": "00000000:00:06.0",
        "name": "NVIDIA H200",
        "persistence_mode": "Enabled",
        "ecc_uncorrected": 0,
        "mig_mode": "Disabled",
        "input": str(CORPUS / "healthy/snapshot-nvidia-smi-table-h200.log"),
        "line": 9,
    }


def test_topology_reader_tabs(engine: Engine) -> None:
    topo = run_case(engine, "node/snapshot-topo-8x4090-all-sys.log").facts["gpu_topology"]
    assert topo["gpus"] == [f"GPU{i}" for i in range(8)]
    assert topo["nvlink"] is False
    assert topo["links"]["GPU0"]["GPU7"] == "SYS"
    assert "GPU0" not in topo["links"]["GPU0"]
    assert topo["cpu_affinity"]["GPU4"] == "56-111,168-223"
    dgx = run_case(engine, "healthy/snapshot-topo-dgx-h100-nv18.log").facts["gpu_topology"]
    assert dgx["nvlink"] is True
    assert dgx["links"]["GPU3"]["GPU5"] == "NV18"


def test_topology_reader_space_aligned(engine: Engine) -> None:
    # vLLM's collect_env prints the matrix with spaces
    topo = run_case(engine, "healthy/snapshot-topo-4gpu-nv12.log").facts["gpu_topology"]
    assert topo["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert topo["links"]["GPU1"] == {"GPU0": "NV12", "GPU2": "NV12", "GPU3": "NV12"}
    assert topo["cpu_affinity"]["GPU0"] == "48-95,144-191"


def test_unit_reader(engine: Engine) -> None:
    units = run_case(engine, "harness/snapshot-systemctl-ollama-auto-restart-127.log").facts[
        "units"
    ]
    assert units == [
        {
            "unit": "ollama.service",
            "description": "Ollama Service",
            "input": str(CORPUS / "harness/snapshot-systemctl-ollama-auto-restart-127.log"),
            "line": 1,
            "loaded": "loaded",
            "active": "activating",
            "sub": "auto-restart",
            "result": "exit-code",
            "main_pid": 20416,
            "exit_code_kind": "exited",
            "exit_status": "127",
        }
    ]


def test_unit_reader_two_units_in_one_paste(engine: Engine) -> None:
    report = run_case(engine, "harness/snapshot-systemctl-status-auto-restart-exit-1.log")
    units = {u["unit"]: u for u in report.facts["units"]}
    assert units["detection_fast_server.service"]["exit_status"] == "1/FAILURE"
    assert units["agent.service"]["active"] == "active"
    assert units["agent.service"]["sub"] == "running"
    assert units["agent.service"]["main_pid"] == 8120


def test_pod_reader_merges_get_and_describe(engine: Engine) -> None:
    pods = run_case(engine, "harness/snapshot-kubectl-crashloop-aibrix-vllm.log").facts["pods"]
    assert len(pods) == 1
    pod = pods[0]
    assert pod["name"] == "deepseek-r1-distill-llama-8b-5cc594fd46-hg5rw"
    assert (pod["ready"], pod["status"], pod["restarts"]) == ("0/1", "CrashLoopBackOff", 5)


def test_pod_reader_describe_last_state(engine: Engine) -> None:
    pod = run_case(engine, "node/snapshot-describe-oomkilled-137-limits.log").facts["pods"][0]
    assert pod["last_state"] == "Terminated"
    assert pod["last_reason"] == "OOMKilled"
    assert pod["exit_code"] == 137
    assert pod["restarts"] == 1


def test_pod_reader_all_namespaces_and_single_spaces(engine: Engine) -> None:
    pods = run_case(engine, "node/snapshot-kubectl-get-pods-a-oomkilled-restarts.log").facts["pods"]
    by_name = {p["name"]: p for p in pods}
    assert by_name["user-directory-646bbbc878-lf4tq"]["status"] == "OOMKilled"
    assert by_name["user-directory-646bbbc878-lf4tq"]["restarts"] == 16
    assert by_name["istiod-7c5d47b4fc-hpv52"]["namespace"] == "istio-system"
    flat = run_case(engine, "harness/snapshot-kubectl-crashloop-langflow-single-space.log")
    assert [(p["name"], p["status"]) for p in flat.facts["pods"]] == [
        ("langflow-0", "CrashLoopBackOff"),
        ("langflow-frontend-5bf4fdddd4-jjf2z", "CrashLoopBackOff"),
    ]


def test_nccl_interface_reader(engine: Engine) -> None:
    nccl = run_case(engine, "node/snapshot-nccl-ib-no-device-socket-veth.log").facts[
        "nccl_interfaces"
    ]
    assert [s["name"] for s in nccl["socket"]] == ["eno1", "veth2ea2288", "vethae2223a"]
    assert nccl["ib_device_found"] is False
    assert nccl["bootstrap"] == "eno1:192.168.1.15"
    assert nccl["hosts"] == ["oneflow-15"]
    ib = run_case(engine, "healthy/snapshot-nccl-ib-using-four-hcas.log").facts["nccl_interfaces"]
    assert [d["device"] for d in ib["ib"]] == ["mlx5_3", "mlx5_2", "mlx5_1", "mlx5_0"]
    assert ib["ib"][0] == {"device": "mlx5_3", "port": 1, "link": "IB"}
    assert ib["oob"] == "ib0:11.5.5.50"


def test_snapshot_facts_validate_against_the_published_schema(engine: Engine) -> None:
    import json

    import jsonschema  # type: ignore[import-untyped]

    schema = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
    for case in (
        "node/snapshot-ulimit-memlock-64-ucx-ibv-create-cq.log",
        "healthy/snapshot-nvidia-smi-q-h200-full.log",
        "node/snapshot-topo-8x4090-all-sys.log",
        "harness/snapshot-systemctl-ollama-auto-restart-127.log",
        "harness/snapshot-kubectl-crashloop-aibrix-vllm.log",
        "node/snapshot-nccl-ib-no-device-socket-veth.log",
    ):
        jsonschema.validate(run_case(engine, case).to_json_dict(), schema)


# ---------------------------------------------------------------- rules and their near misses

# (signature, a snapshot line that shows the problem, the healthy line of the same snapshot)
RULES = [
    (
        "memlock-limit-too-low",
        "max locked memory       (kbytes, -l) 64",
        "max locked memory       (kbytes, -l) unlimited",
    ),
    (
        "memlock-limit-too-low",
        "max locked memory       (kbytes, -l) 8192",
        "max locked memory           (kbytes, -l) 264154548",
    ),
    (
        "too-many-open-files",
        "open files                      (-n) 1024",
        "open files                      (-n) 1048576",
    ),
    (
        "gpu-topology-no-direct-path",
        "GPU0\t X \tPHB\t0-31\t0\t\tN/A",
        "GPU0\t X \tNV4\t0-31\t0\t\tN/A",
    ),
    (
        "gpu-topology-no-direct-path",
        "GPU1\tSYS\t X \tSYS\tSYS\t0-55,112-167\t0\t\tN/A",
        "GPU1\tPIX\t X \tSYS\tSYS\t0-55,112-167\t0\t\tN/A",
    ),
    (
        "k8s-pod-crashloopbackoff",
        "vllm-mistral-deployment-vllm-67dd8b6d79-kk7fs   0/1     CrashLoopBackOff   4 (73s ago)   2m49s",
        "vllm-deployment-router-8666bf6464-4whxb         1/1     Running            0             2m49s",
    ),
    (
        "k8s-image-pull-backoff",
        "redis-deploy-54b67b7b4-g2c9q         0/1     ImagePullBackOff   0          118s",
        "redis-deploy-54b67b7b4-g2c9q         1/1     Running            0          118s",
    ),
    (
        "systemd-unit-failed-status",
        "   Active: failed (Result: exit-code) since Wed 2024-10-02 11:22:18 CEST; 24min ago",
        "     Active: active (running) since Sat 2025-02-15 23:56:25 CST; 9h ago",
    ),
    (
        "kubernetes-container-oomkilled",
        "      Reason:       OOMKilled",
        "      Reason:       Completed",
    ),
    (
        "nccl-socket-virtual-interface",
        "h:1:2 [0] NCCL INFO NET/Socket : Using [0]eno1:192.168.1.15<0> [1]veth2ea2288:fe80::1%veth2ea2288<0>",
        "h:1:2 [0] NCCL INFO NET/Socket : Using [0]eno1:192.168.1.15<0>",
    ),
    (
        "nccl-socket-loopback-interface",
        "h:4152:4206 [0] NCCL INFO NET : Using interface lo:127.0.0.1<0>",
        "h:4152:4206 [0] NCCL INFO NET : Using interface eth0:10.151.40.240<0>",
    ),
    (
        "k8s-probe-kills-model-server",
        "  Warning  Unhealthy  25m (x3 over 25m)  kubelet  Liveness probe failed: HTTP probe failed"
        " with statuscode: 404",
        "    Liveness:       tcp-socket :5432 delay=0s timeout=1s period=3s #success=1 #failure=3",
    ),
    (
        "gpu-row-remapping-failure",
        "        Remapping Failure Occurred                     : Yes",
        "        Remapping Failure Occurred                     : No",
    ),
]


@pytest.mark.parametrize(
    ("sig", "bad", "good"), RULES, ids=[f"{r[0]}-{i}" for i, r in enumerate(RULES)]
)
def test_rule_fires_on_the_problem_line_not_on_its_near_miss(
    engine: Engine, sig: str, bad: str, good: str
) -> None:
    fired = run_text(engine, bad + "\n")
    assert sig in signatures(fired), signatures(fired)
    evidence = next(h for h in fired.hypotheses if h.signature == sig).evidence
    assert evidence[0].line == 1 and evidence[0].role == "decisive"
    quiet = run_text(engine, good + "\n")
    assert sig not in signatures(quiet), signatures(quiet)


# ---------------------------------------------------------------- a mixed paste


def _read(relpath: str) -> str:
    return (CORPUS / relpath).read_text()


def test_mixed_paste_two_snapshots_and_a_server_log(engine: Engine) -> None:
    """An issue body: `ulimit -a`, then `nvidia-smi`, then the server log, in one input."""
    ulimit = _read("node/snapshot-ulimit-memlock-64-ucx-ibv-create-cq.log")
    table = _read("healthy/snapshot-nvidia-smi-table-h200.log")
    server = _read("healthy/vllm-0.10-qwen2-7b-a100-startup-wrapped.log")
    paste = ulimit + "\n$ nvidia-smi\n" + table + "\n" + server
    report = run_text(engine, paste, "issue-body.md")
    facts: dict[str, Any] = report.facts
    assert facts["ulimit"]["memlock_kb"] == 64
    assert facts["gpus"][0]["name"] == "NVIDIA H200"
    assert facts["vllm_version"] == "0.10.1.1"  # the server log's own facts are still read
    top = report.hypotheses[0]
    assert top.signature == "memlock-limit-too-low"
    memlock_row = ulimit.splitlines().index("max locked memory       (kbytes, -l) 64") + 1
    assert top.evidence[0].line == memlock_row
    # the GPU snapshot adds nothing, the server log only what it says alone (an info note)
    alone = set(signatures(run_text(engine, server)))
    assert set(signatures(report)) - alone <= {"memlock-limit-too-low", "too-many-open-files"}


def test_mixed_healthy_paste_is_silent(engine: Engine) -> None:
    paste = "\n".join(
        _read(p)
        for p in (
            "healthy/snapshot-ulimit-a-gpu-container.log",
            "healthy/snapshot-topo-dgx-h100-nv18.log",
            "healthy/snapshot-kubectl-get-pods-all-running.log",
            "healthy/vllm-0.10-qwen2-7b-a100-startup-wrapped.log",
        )
    )
    report = run_text(engine, paste, "issue-body.md")
    server = run_text(engine, _read("healthy/vllm-0.10-qwen2-7b-a100-startup-wrapped.log"))
    assert signatures(report) == signatures(server)  # the snapshots add no hypothesis
    assert all(h.severity == "info" for h in report.hypotheses)
    assert report.unrecognized == [] and not report.failed
    assert {"ulimit", "gpu_topology", "pods", "vllm_version"} <= set(report.facts)


# ---------------------------------------------------------------- the healthy snapshots

HEALTHY = sorted(p.name for p in (CORPUS / "healthy").glob("snapshot-*.log"))


def test_healthy_snapshot_corpus_is_large_enough() -> None:
    assert len(HEALTHY) >= 6


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_snapshot_is_silent(engine: Engine, name: str) -> None:
    report = run_case(engine, f"healthy/{name}")
    assert report.hypotheses == [], signatures(report)
    assert report.unrecognized == []
    assert report.facts, "a healthy snapshot still yields its facts"
