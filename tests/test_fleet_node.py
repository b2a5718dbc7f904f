"""`triage node-check` and `triage export npd`: node-problem-detector's custom-plugin protocol on
real kernel logs from the corpus, the signature families, the time and byte windows, the journal
(real journalctl over journal files made with systemd-journal-remote when it is installed), the
exported config against a JSON Schema written from NPD's documented fields, and deploy/k8s/.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml

from triage.api import Engine
from triage.fleet.families import (
    FAMILIES,
    FAMILY_NAMES,
    NOT_NODE_HEALTH,
    family,
    family_map,
    family_of,
)
from triage.fleet.node import OK, triage_windows, verdict
from triage.fleet.npd import npd_config
from triage.fleet.window import (
    WindowError,
    drop_before,
    kernel_command,
    line_time,
    parse_since,
    read_file_tail,
    read_journal,
)

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "corpus"
HEALTHY_KERNEL_LOGS = sorted((CORPUS / "healthy").glob("dmesg-*.log"))
XID79_CASES = {
    # the two fallen-off-the-bus (Xid 79) excerpts of the corpus and the message NPD must show
    "gpu-fallen-off-bus-bumblebee-probe.log": "gpu-fallen-off-the-bus: Xid 79 on 0000:01:00.0",
    "gpu-fallen-off-bus-multiline-no-xid.log": "gpu-fallen-off-the-bus: Xid 79 on 0000:b3:00.0",
}
# Real message forms, as the knowledge base's examples quote them.
XID79_LINE = "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus."
HEALTHY_LINE = "nvidia-nvlink: Nvlink Core is being initialized, major device number 234"


def node_check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "triage", "node-check", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )


def assert_protocol(proc: subprocess.CompletedProcess[str], status: int, limit: int = 80) -> str:
    """NPD reads the exit status and stdout: exactly one line, within max_output_length."""
    assert proc.returncode == status, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    assert 0 < len(lines[0]) <= limit
    return lines[0]


# -- families ------------------------------------------------------------------------------------


def test_every_node_layer_signature_is_in_one_family_or_listed_as_none(engine: Engine) -> None:
    families = family_map(engine.kb.signatures)
    unclassified = sorted(i for i, f in families.items() if f is None and i not in NOT_NODE_HEALTH)
    assert not unclassified, (
        f"classify {unclassified}: give it a family tag (triage/fleet/families.py) "
        "or list it in NOT_NODE_HEALTH"
    )
    stale = sorted(NOT_NODE_HEALTH - set(families))
    assert not stale, f"NOT_NODE_HEALTH names signatures that are not node-layer: {stale}"
    double = sorted(i for i in NOT_NODE_HEALTH if families.get(i) is not None)
    assert not double, f"in a family and listed as none: {double}"
    for fam in FAMILIES:
        assert any(f == fam.name for f in families.values()), f"family {fam.name} is empty"


def test_families_follow_the_hardware_the_signature_names(engine: Engine) -> None:
    by_id = engine.kb.by_id
    expected = {
        "gpu-fallen-off-the-bus": "pcie",  # Xid 79
        "nvidia-xid-74-nvlink-error": "nvlink-fabric",
        "fabric-manager-driver-version-mismatch": "nvlink-fabric",
        "nvidia-xid-48-double-bit-ecc": "memory-ecc",
        "nvidia-xid-94-contained-ecc-error": "memory-ecc",
        "pcie-aer-uncorrected-error": "pcie",
        "nvidia-xid-13-graphics-engine-exception": "gpu-xid",
        "nvidia-xid-31-mmu-fault": "gpu-xid",
        "nvml-driver-library-version-mismatch": "driver-container",
        "nvidia-container-cli-initialization-error": "driver-container",
    }
    assert {i: family_of(by_id[i]) for i in expected} == expected
    engine_layer = next(s for s in engine.kb.signatures if s.layer != "node")
    assert family_of(engine_layer) is None


# -- node-check on corpus kernel logs ------------------------------------------------------------


@pytest.mark.parametrize("log", HEALTHY_KERNEL_LOGS, ids=lambda p: p.name)
def test_healthy_kernel_logs_are_ok(log: Path) -> None:
    assert HEALTHY_KERNEL_LOGS
    line = assert_protocol(node_check(str(log)), 0)
    assert line == "OK: no node failure in the window"


def test_every_healthy_log_together_is_ok() -> None:
    logs = sorted(str(p) for p in (CORPUS / "healthy").glob("*.log"))
    assert_protocol(node_check(*logs, "--max-bytes", "64M"), 0)


@pytest.mark.parametrize("name", sorted(XID79_CASES))
def test_xid79_is_non_ok_with_signature_xid_and_device(name: str) -> None:
    log = str(CORPUS / "node" / name)
    assert assert_protocol(node_check(log), 1) == XID79_CASES[name]
    assert assert_protocol(node_check("--family", "pcie", log), 1) == XID79_CASES[name]
    # another family's condition stays OK
    assert assert_protocol(node_check("--family", "gpu-xid", log), 0) == (
        "OK: no gpu-xid failure in the window"
    )


def _node_cases(engine: Engine) -> list[tuple[Path, str]]:
    out = []
    for expected in sorted((CORPUS / "node").glob("*.expected.yaml")):
        top = (yaml.safe_load(expected.read_text()) or {}).get("expect", {}).get("top")
        sig = engine.kb.by_id.get(top) if top else None
        if sig and sig.severity == "error" and family_of(sig) and top not in NOT_NODE_HEALTH:
            out.append((expected.with_name(expected.name.replace(".expected.yaml", ".log")), top))
    return out


def test_every_corpus_node_failure_of_a_family_is_non_ok_naming_it(engine: Engine) -> None:
    cases = _node_cases(engine)
    assert len(cases) >= 10
    wrong = {}
    for log, top in cases:
        result = verdict(triage_windows(engine, [read_file_tail(log, 8 << 20)]), engine, None)
        if result.status != 1 or not result.message.startswith(top):
            wrong[log.name] = (top, result.status, result.message)
        fam = family(str(family_of(engine.kb.by_id[top])))
        in_family = verdict(triage_windows(engine, [read_file_tail(log, 8 << 20)]), engine, fam)
        assert in_family.status == 1, log.name
    assert not wrong


def test_message_is_deterministic_as_the_window_moves(engine: Engine, tmp_path: Path) -> None:
    """The message names the failure, not the time or how often: more lines, same message."""
    src = (CORPUS / "node" / "xid13-burst-then-xid43-dmesg-decode-iso.log").read_bytes()
    log = tmp_path / "kern.log"
    log.write_bytes(src)
    first = verdict(triage_windows(engine, [read_file_tail(log, 8 << 20)]), engine, None)
    with log.open("ab") as fh:
        for i in range(200):
            fh.write(f"[{1843 + i}.308145] {HEALTHY_LINE}\n".encode())
        fh.write(src)  # the same burst again, later
    later = verdict(triage_windows(engine, [read_file_tail(log, 8 << 20)]), engine, None)
    assert first.status == later.status == 1
    assert first.message == later.message
    assert "2025" not in first.message and "04:41" not in first.message


def test_message_fits_max_output_length() -> None:
    log = str(CORPUS / "node" / "xid-94-31-43-dmesg-grep-gpu-node.log")
    assert assert_protocol(node_check(log), 1) == (
        "nvidia-xid-94-contained-ecc-error: Xid 94 on 0000:00:08"
    )
    short = assert_protocol(node_check("--max-output-length", "41", log), 1, limit=41)
    assert short == "nvidia-xid-94-contained-ecc-error: Xid 94"
    tiny = assert_protocol(node_check("--max-output-length", "12", log), 1, limit=12)
    assert tiny == "nvidia-xid-9"


def test_severity_warning_makes_a_warning_non_ok(tmp_path: Path) -> None:
    # Xid 63 "row marked for remapping" alone is a warning (the GPU wants a reset when idle). The
    # line is gpu-row-remapping-pending's own example. (The corpus's Xid 45 case used to be the
    # warning here; its lines name the Xid 149/145 before them, so it now routes to that error.)
    log = tmp_path / "kern.log"
    log.write_text(
        "kernel: NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for "
        "remapping, reset gpu to activate.\n"
    )
    assert_protocol(node_check(str(log)), 0)
    line = assert_protocol(node_check("--severity", "warning", str(log)), 1)
    assert line.startswith("gpu-row-remapping-pending: Xid 63")


# -- windows -------------------------------------------------------------------------------------


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")


def test_time_window_over_a_file(tmp_path: Path) -> None:
    now = time.time()
    log = tmp_path / "kern.log"
    old = [f"{_iso(now - 7200)} gpu01 kernel: {XID79_LINE}"]
    recent = [f"{_iso(now - 120 + i)} gpu01 kernel: {HEALTHY_LINE}" for i in range(20)]
    log.write_text("\n".join(old + recent) + "\n")
    # the Xid is two hours old: outside a 10-minute window, inside 3 hours, and a file without
    # --since is windowed by bytes only
    assert_protocol(node_check("--since", "-10min", str(log)), 0)
    assert_protocol(node_check("--since", "3h", str(log)), 1)
    assert_protocol(node_check(str(log)), 1)
    log.write_text("\n".join([*recent, f"{_iso(now - 30)} gpu01 kernel: {XID79_LINE}"]) + "\n")
    assert assert_protocol(node_check("--since", "-10min", str(log)), 1) == (
        "gpu-fallen-off-the-bus: Xid 79 on 0000:44:00"
    )


def test_line_time_reads_kernel_log_stamps() -> None:
    now = datetime(2026, 1, 5, 12, 0, 0).timestamp()
    iso = "kern  :warn  : 2025-01-21T04:41:44,283302+00:00 NVRM: Xid (PCI:0000:38:00): 13"
    assert line_time(iso, now) == datetime(2025, 1, 21, 4, 41, 44, tzinfo=UTC).timestamp()
    short_iso = "2026-11-29T10:00:00+0100 host kernel: x"
    assert line_time(short_iso, now) == datetime(2026, 11, 29, 9, 0, 0, tzinfo=UTC).timestamp()
    dmesg_t = "[Fri Aug  9 13:32:56 2024] NVRM: Xid (PCI:0000:00:08): 94, pid='<unknown>'"
    assert line_time(dmesg_t, now) == datetime(2024, 8, 9, 13, 32, 56).timestamp()
    # syslog has no year: a December stamp read in January is last year's
    assert (
        line_time("Dec 30 17:37:45 host kernel: x", now)
        == datetime(2025, 12, 30, 17, 37, 45).timestamp()
    )
    assert (
        line_time("Jan  5 11:59:00 host kernel: x", now) == datetime(2026, 1, 5, 11, 59).timestamp()
    )
    assert line_time("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0", now) is None


def test_drop_before_keeps_unstamped_logs_whole() -> None:
    now = time.time()
    relative = b"[ 49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus.\n"
    assert drop_before(relative, now - 60, now) == relative
    stamped = f"{_iso(now - 3600)} old\n  continuation\n{_iso(now - 10)} new\n  tail\n".encode()
    assert drop_before(stamped, now - 60, now) == f"{_iso(now - 10)} new\n  tail\n".encode()
    assert drop_before(f"{_iso(now - 3600)} old\n".encode(), now - 60, now) == b""


def test_parse_since() -> None:
    assert parse_since("-10min").seconds == 600
    assert parse_since("2h").seconds == 7200
    assert parse_since("boot").boot
    assert parse_since("all").unbounded
    with pytest.raises(ValueError):
        parse_since("yesterday")


def test_byte_window_keeps_the_tail_from_a_line_start(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text(f"{XID79_LINE}\n" + f"[ 1.0] {HEALTHY_LINE}\n" * 2000)
    window = read_file_tail(log, 4096)
    assert window.truncated and len(window.data) <= 4096
    assert window.data.startswith(b"[ 1.0] nvidia-nvlink")
    # the Xid is before the last 4 KiB: outside the window
    assert_protocol(node_check("--max-bytes", "4K", str(log)), 0)
    assert_protocol(node_check("--max-bytes", "1M", str(log)), 1)


# -- Unknown -------------------------------------------------------------------------------------


def test_unknown_when_the_check_cannot_look(tmp_path: Path) -> None:
    line = assert_protocol(node_check(str(tmp_path / "missing.log")), 2)
    assert line.startswith("Unknown: no such file or directory: /")
    assert assert_protocol(node_check("--since", "soon", str(tmp_path)), 2).startswith(
        "Unknown: --since"
    )
    assert assert_protocol(node_check("--family", "gpu-power"), 2).startswith(
        "Unknown: unknown family"
    )
    broken = tmp_path / "signatures" / "node"
    broken.mkdir(parents=True)
    (broken / "bad.yaml").write_text("id: [unclosed\n")
    line = assert_protocol(
        node_check(
            "--signatures",
            str(tmp_path / "signatures"),
            str(CORPUS / "healthy" / HEALTHY_KERNEL_LOGS[0].name),
        ),
        2,
    )
    assert line.startswith("Unknown: knowledge base")


@pytest.mark.skipif(shutil.which("journalctl") is None, reason="journalctl not installed")
def test_unknown_when_the_journal_is_not_there(tmp_path: Path) -> None:
    """A journal directory with no journal in it must not read as a healthy node."""
    empty = tmp_path / "journal"
    empty.mkdir()
    line = assert_protocol(node_check("--journal-dir", str(empty)), 2)
    assert line == "Unknown: journalctl: no journal files found (journal not mounted?)"
    line = assert_protocol(node_check("--journal-dir", str(tmp_path / "absent")), 2)
    assert line.startswith("Unknown: journalctl failed")


def test_unknown_when_journalctl_is_missing(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no journalctl there
    line = assert_protocol(node_check(env=env), 2)
    assert line == "Unknown: cannot run journalctl: no such file or directory"


JOURNAL_REMOTE = Path("/lib/systemd/systemd-journal-remote")


def _journal(directory: Path, entries: list[dict[str, Any]]) -> None:
    """Real journal files, written by systemd-journal-remote from journal export format."""
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")
    blocks = []
    for e in entries:
        fields = {"__REALTIME_TIMESTAMP": str(int(e.pop("at") * 1e6)), "_BOOT_ID": boot, **e}
        blocks.append("".join(f"{k}={v}\n" for k, v in fields.items()))
    export = directory.parent / "export.txt"
    export.write_text("\n".join(blocks) + "\n")
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [str(JOURNAL_REMOTE), "-o", str(directory / "remote.journal"), str(export)],
        check=True,
        capture_output=True,
        timeout=60,
    )


@pytest.mark.skipif(
    not JOURNAL_REMOTE.exists() or shutil.which("journalctl") is None,
    reason="needs journalctl and systemd-journal-remote (apt-get install systemd-journal-remote)",
)
def test_real_journal_kernel_and_unit_windows(tmp_path: Path) -> None:
    now = time.time()
    kernel = {"_TRANSPORT": "kernel", "SYSLOG_IDENTIFIER": "kernel", "PRIORITY": "3"}
    journal = tmp_path / "journal"
    _journal(
        journal,
        [
            {**kernel, "at": now - 7200, "MESSAGE": XID79_LINE},
            {**kernel, "at": now - 60, "MESSAGE": HEALTHY_LINE},
        ],
    )
    # the Xid is two hours old: out of the default 10 minutes, in this boot
    assert_protocol(node_check("--journal-dir", str(journal)), 0)
    assert assert_protocol(node_check("--journal-dir", str(journal), "--since", "boot"), 1) == (
        "gpu-fallen-off-the-bus: Xid 79 on 0000:44:00"
    )
    fm_log = (CORPUS / "node" / "fabric-manager-version-mismatch-gpu-operator.log").read_text()
    fm_line = fm_log.splitlines()[0].split(": ", 1)[1]  # the message, without its syslog tag
    unit = {
        "_SYSTEMD_UNIT": "nvidia-fabricmanager.service",
        "SYSLOG_IDENTIFIER": "nv-fabricmanager",
    }
    _journal(tmp_path / "journal2", [{**unit, "at": now - 30, "MESSAGE": fm_line}])
    args = ["--journal-dir", str(tmp_path / "journal2")]
    assert_protocol(node_check(*args), 0)  # not a kernel message
    line = assert_protocol(node_check(*args, "--unit", "nvidia-fabricmanager"), 1)
    assert line.startswith("fabric-manager-driver-version-mismatch")


def test_record_puts_a_failure_in_the_history_once(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    log = str(CORPUS / "node" / "gpu-fallen-off-bus-bumblebee-probe.log")
    for _ in range(2):
        assert_protocol(node_check("--record", "--db", str(db), log), 1)
    assert_protocol(node_check("--record", "--db", str(db), str(HEALTHY_KERNEL_LOGS[0])), 0)
    with sqlite3.connect(db) as conn:
        runs = conn.execute("SELECT run_id FROM runs").fetchall()
        hits = conn.execute("SELECT signature FROM hits").fetchall()
    assert len(runs) == 1 and runs[0][0].startswith("node-check/all/")
    assert ("gpu-fallen-off-the-bus",) in hits


# -- export npd ----------------------------------------------------------------------------------

# NPD's custom plugin monitor config, written from its documented fields
# (docs/custom_plugin_monitor.md and the json tags of pkg/custompluginmonitor/types and pkg/types).
GO_DURATION = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"
NPD_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["plugin", "source", "conditions", "rules"],
    "additionalProperties": False,
    "properties": {
        "plugin": {"const": "custom"},
        "pluginConfig": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "invoke_interval": {"type": "string", "pattern": GO_DURATION},
                "timeout": {"type": "string", "pattern": GO_DURATION},
                "max_output_length": {"type": "integer", "minimum": 1},
                "concurrency": {"type": "integer", "minimum": 1},
                "enable_message_change_based_condition_update": {"type": "boolean"},
                "skip_initial_status": {"type": "boolean"},
            },
        },
        "source": {"type": "string", "minLength": 1},
        "metricsReporting": {"type": "boolean"},
        "conditions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type", "reason", "message"],
                "additionalProperties": False,
                "properties": {
                    "type": {"type": "string", "pattern": "^[A-Z][A-Za-z0-9]*$"},
                    "reason": {"type": "string", "pattern": "^[A-Z][A-Za-z0-9]*$"},
                    "message": {"type": "string"},
                },
            },
        },
        "rules": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["type", "reason", "path"],
                "additionalProperties": False,
                "properties": {
                    "type": {"enum": ["temporary", "permanent"]},
                    "condition": {"type": "string"},
                    "reason": {"type": "string", "pattern": "^[A-Z][A-Za-z0-9]*$"},
                    "path": {"type": "string", "minLength": 1},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "timeout": {"type": "string", "pattern": GO_DURATION},
                    "invoke_interval": {"type": "string", "pattern": GO_DURATION},
                },
            },
        },
    },
}


def _seconds(duration: str) -> float:
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    return sum(
        float(n) * units[u] for n, u in re.findall(r"([0-9.]+)(ns|us|µs|ms|s|m|h)", duration)
    )


def validate_npd(config: dict[str, Any]) -> None:
    """The schema, then what NPD checks when it loads a config (documented in its README and
    config validation): a rule's timeout is at most the global one, a permanent rule's condition
    has a default, and a path is absolute here (it must exist in NPD's container)."""
    jsonschema.validate(config, NPD_SCHEMA)
    global_timeout = _seconds(config.get("pluginConfig", {}).get("timeout", "5s"))
    defaults = {c["type"] for c in config["conditions"]}
    for rule in config["rules"]:
        assert _seconds(rule.get("timeout", "0s")) <= global_timeout, rule
        if rule["type"] == "permanent":
            assert rule.get("condition") in defaults, rule
        assert rule["path"].startswith("/"), rule


def test_exported_config_validates_against_npd_fields() -> None:
    config = npd_config()
    validate_npd(config)
    assert [c["type"] for c in config["conditions"]] == [f.condition for f in FAMILIES]
    families = []
    for rule in config["rules"]:
        assert rule["type"] == "permanent"
        assert rule["args"][:2] == ["node-check", "--family"]
        families.append(rule["args"][2])
    assert families == list(FAMILY_NAMES)
    assert config["pluginConfig"]["enable_message_change_based_condition_update"] is True
    assert config["pluginConfig"]["max_output_length"] == 80
    with pytest.raises(jsonschema.ValidationError):  # the schema does reject a wrong field
        validate_npd({**config, "rules": [{**config["rules"][0], "command": "x"}]})


def test_export_cli_and_each_rule_runs_as_npd_would(tmp_path: Path) -> None:
    out = tmp_path / "npd.json"
    proc = subprocess.run(
        [sys.executable, "-m", "triage", "export", "npd", "--out", str(out), "--unit", "kubelet"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    config = json.loads(out.read_text())
    validate_npd(config)
    assert all(r["args"][-2:] == ["--unit", "kubelet"] for r in config["rules"])
    # every rule's command line, on the Xid 79 log: NonOK for the PCIe condition only
    log = str(CORPUS / "node" / "gpu-fallen-off-bus-multiline-no-xid.log")
    statuses = {}
    for rule in npd_config()["rules"]:
        proc = node_check(*rule["args"][1:], log)
        assert_protocol(proc, proc.returncode)
        statuses[rule["condition"]] = proc.returncode
    assert statuses == {f.condition: (1 if f.name == "pcie" else OK) for f in FAMILIES}
    bad = subprocess.run(
        [sys.executable, "-m", "triage", "export", "npd", "--family", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and "unknown family nope" in bad.stderr


# -- deploy/k8s ----------------------------------------------------------------------------------


def _k8s(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((ROOT / "deploy" / "k8s" / name).read_text()) if d]


def test_configmap_holds_the_exported_config() -> None:
    (configmap,) = _k8s("configmap.yaml")
    assert configmap["kind"] == "ConfigMap"
    assert json.loads(configmap["data"]["triage-plugin-monitor.json"]) == npd_config(), (
        "deploy/k8s/configmap.yaml is stale: regenerate it (command in its header)"
    )


def test_daemonset_runs_npd_with_the_config_and_a_read_only_journal() -> None:
    (ds,) = _k8s("daemonset.yaml")
    (configmap,) = _k8s("configmap.yaml")
    assert ds["kind"] == "DaemonSet"
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    config_flag = next(
        a for a in container["command"] if a.startswith("--config.custom-plugin-monitor=")
    )
    config_path = Path(config_flag.split("=", 1)[1])
    config_mount = mounts[str(config_path.parent)]
    assert volumes[config_mount["name"]]["configMap"]["name"] == configmap["metadata"]["name"]
    assert config_path.name in configmap["data"]
    for path in ("/var/log/journal", "/run/log/journal", "/etc/machine-id"):
        assert mounts[path]["readOnly"] is True
        assert volumes[mounts[path]["name"]]["hostPath"]["path"] == path
    # the root file system is read-only; the caches go to a writable emptyDir
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert "emptyDir" in volumes[mounts[env["TRIAGE_CACHE_DIR"]]["name"]]
    # every host path is mounted read-only
    for mount in container["volumeMounts"]:
        if "hostPath" in volumes[mount["name"]]:
            assert mount.get("readOnly") is True, mount
    # the image: NPD's binary where the DaemonSet runs it, triage where the rules find it
    recipe = (ROOT / "deploy" / "k8s" / "Containerfile").read_text()
    assert f"COPY --from=npd {container['command'][0]} " in recipe
    assert "FROM python:" in recipe  # pip puts the console script in /usr/local/bin there
    assert {r["path"] for r in json.loads(configmap["data"][config_path.name])["rules"]} == {
        "/usr/local/bin/triage"
    }
    assert "pip install --no-cache-dir /src" in recipe and "triage --version" in recipe
    rbac = _k8s("rbac.yaml")
    assert {d["kind"] for d in rbac} == {"ServiceAccount", "ClusterRoleBinding"}
    assert (
        pod["serviceAccountName"]
        == next(d for d in rbac if d["kind"] == "ServiceAccount")["metadata"]["name"]
    )
    kustomization = _k8s("kustomization.yaml")[0]
    assert set(kustomization["resources"]) == {"rbac.yaml", "configmap.yaml", "daemonset.yaml"}


def test_journal_reader_times_out_and_never_blocks_on_stderr() -> None:
    """The journal reader on real programs: one that hangs is killed after the timeout; one that
    writes a megabyte to stderr (more than a pipe holds) does not deadlock it."""
    with pytest.raises(WindowError, match=r"timed out after 0\.5s"):
        read_journal(["sleep", "30"], 1024, timeout=0.5)
    noisy = [
        "sh",
        "-c",
        "head -c 1000000 /dev/zero | tr '\\0' e >&2; echo " + shlex.quote(XID79_LINE),
    ]
    window = read_journal(noisy, 1 << 20, timeout=30)
    assert window.data == (XID79_LINE + "\n").encode()
    with pytest.raises(WindowError, match="journalctl failed: exit status 3"):
        read_journal(["sh", "-c", "exit 3"], 1024)


@pytest.mark.skipif(
    not JOURNAL_REMOTE.exists() or shutil.which("journalctl") is None,
    reason="needs journalctl and systemd-journal-remote (apt-get install systemd-journal-remote)",
)
def test_real_journal_is_read_from_its_end_only(tmp_path: Path) -> None:
    now = time.time()
    kernel = {"_TRANSPORT": "kernel", "SYSLOG_IDENTIFIER": "kernel"}
    entries = [{**kernel, "at": now - 300, "MESSAGE": XID79_LINE}]
    entries += [{**kernel, "at": now - 200 + i / 100, "MESSAGE": HEALTHY_LINE} for i in range(1500)]
    _journal(tmp_path / "journal", entries)
    args = ["--journal-dir", str(tmp_path / "journal")]
    assert_protocol(node_check(*args), 1)
    # a 1 KiB window of the boot asks journalctl for its last 1000 entries (the Xid is the
    # 1501st from the end); read here with a large byte window: only -n can leave it out
    command = kernel_command(parse_since("boot"), tmp_path / "journal", 1024)
    assert command[command.index("-n") + 1] == "1000"
    window = read_journal(command, 1 << 20)
    assert window.data.count(b"\n") == 1000 and b"Xid" not in window.data
    assert_protocol(node_check(*args, "--since", "boot", "--max-bytes", "1K"), 0)
    assert_protocol(node_check(*args, "--since", "boot"), 1)
    # with a time window no -n: journalctl would count it from the cutoff, the Xid first
    assert "-n" not in kernel_command(parse_since("-10min"), tmp_path / "journal", 1024)


# -- deploy/slurm --------------------------------------------------------------------------------

SLURM = ROOT / "deploy" / "slurm"
FLEET_DOC = (ROOT / "docs" / "fleet.md").read_text()


def _exec_start() -> str:
    unit = (SLURM / "triage-node-check.service").read_text()
    return next(
        line.split("=", 1)[1] for line in unit.splitlines() if line.startswith("ExecStart=")
    )


def test_timer_unit_runs_node_check_options_that_exist_as_the_docs_show() -> None:
    command = _exec_start()
    assert f"ExecStart={command}" in FLEET_DOC
    assert command.split()[1] == "node-check"
    help_text = subprocess.run(
        [sys.executable, "-m", "triage", "node-check", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
        check=True,
    ).stdout
    for option in re.findall(r"(--[a-z][a-z-]+)", command):
        assert option in help_text, option
    health = (SLURM / "triage-health").read_text()
    assert os.access(SLURM / "triage-health", os.X_OK)
    script = [line.strip() for line in health.splitlines() if line and not line.startswith("#")]
    shown = (
        FLEET_DOC.split("(`deploy/slurm/triage-health`", 1)[1]
        .split("```sh\n", 1)[1]
        .split("```")[0]
    )
    assert [line.strip() for line in shown.splitlines()] == script[:4]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze")
def test_timer_and_service_verify(tmp_path: Path) -> None:
    triage_script = Path(sys.executable).with_name("triage")
    if not triage_script.exists():
        pytest.skip("no triage console script next to the interpreter")
    for name in ("triage-node-check.service", "triage-node-check.timer"):
        text = (SLURM / name).read_text().replace("/usr/local/bin/triage", str(triage_script))
        (tmp_path / name).write_text(text)
    proc = subprocess.run(
        [
            "systemd-analyze",
            "verify",
            str(tmp_path / "triage-node-check.timer"),
            str(tmp_path / "triage-node-check.service"),
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr.decode()


def test_health_check_program_drains_on_non_ok_only(tmp_path: Path) -> None:
    """The HealthCheckProgram with triage reading a file instead of the journal, and a stand-in
    for Slurm's scontrol (there is no Slurm here) that records how it was called."""
    calls = tmp_path / "scontrol.calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {calls}\n')
    (bin_dir / "scontrol").chmod(0o755)
    script = (SLURM / "triage-health").read_text()
    for log, drained in (
        (CORPUS / "node" / "gpu-fallen-off-bus-bumblebee-probe.log", True),
        (HEALTHY_KERNEL_LOGS[0], False),
        (tmp_path / "missing.log", False),
    ):
        calls.unlink(missing_ok=True)
        local = script.replace(
            "/usr/local/bin/triage node-check --since boot",
            f"{sys.executable} -m triage node-check {log}",
        )
        (tmp_path / "health").write_text(local)
        proc = subprocess.run(
            ["sh", str(tmp_path / "health")],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        )
        assert proc.returncode == 0
        assert calls.exists() == drained, log.name
        if drained:
            args = calls.read_text().splitlines()
            assert args[:2] == ["update", f"nodename={os.uname().nodename.split('.')[0]}"]
            assert args[2:] == [
                "state=drain",
                "reason=triage: gpu-fallen-off-the-bus: Xid 79 on 0000:01:00.0",
            ]
