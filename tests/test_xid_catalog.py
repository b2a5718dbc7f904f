"""The Xid catalog: every Xid number NVIDIA's catalog documents (1-172) yields a node-layer
hypothesis that names it, in the wrappers the driver line comes in; a number outside the catalog
yields the named "not in the catalog" finding on its line; no Xid line is ever silent."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from triage.api import Engine

# NVIDIA's "Analyzing Xid Errors with the Xid Catalog" lists codes 1 to 172 (unused ones included).
DOCUMENTED = range(1, 173)
UNDOCUMENTED = (0, 173, 175, 250, 999, 1234)
NOT_IN_CATALOG = "nvidia-xid-not-in-catalog"
PCI = "0000:1b:00"

# The driver line in the wrappers operators paste: raw dmesg, dmesg -T, dmesg --time-format iso,
# journalctl -k (short) and journalctl -k -o short-iso.
WRAPPERS = {
    "dmesg": "[ 1234.567890] {line}",
    "journalctl-short-iso": "2026-12-01T23:10:15+0000 gpu-node-01 kernel: {line}",
}
MORE_WRAPPERS = {
    "dmesg-T": "[Tue Dec  1 23:10:15 2026] {line}",
    "dmesg-iso": "2026-12-01T23:10:15,123456+00:00 {line}",
    "journalctl-k": "Dec 01 23:10:15 gpu-node-01 kernel: {line}",
}

# A number in a title: alone or as the end of a range "a-b", delimited by space, comma, slash or
# parenthesis (so "NVLink5" or "CE0-CE19" name nothing).
_TITLE_NUMBER = re.compile(r"(?:(?<=[\s,/(])|^)(\d+)(?:-(\d+))?(?=[\s,/):]|$)")


def driver_line(xid: int) -> str:
    return f"NVRM: Xid (PCI:{PCI}): {xid}, pid=4242, name=python3, catalog test line"


def names_xid(signature: str, title: str, xid: int) -> bool:
    """Whether a hypothesis's id or title names the Xid number."""
    if str(xid) in signature.split("-"):
        return True
    for m in _TITLE_NUMBER.finditer(title):
        low = int(m.group(1))
        high = int(m.group(2)) if m.group(2) else low
        if low <= xid <= high:
            return True
    return False


def run_line(engine: Engine, tmp_path: Path, text: str) -> list:  # type: ignore[type-arg]
    log = tmp_path / "kern.log"
    log.write_text(text + "\n", encoding="utf-8")
    return list(engine.run([str(log)]).hypotheses)


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
def test_every_documented_xid_is_named(engine: Engine, tmp_path: Path, wrapper: str) -> None:
    silent, unnamed = [], []
    for xid in DOCUMENTED:
        hyps = run_line(engine, tmp_path, WRAPPERS[wrapper].format(line=driver_line(xid)))
        if not hyps:
            silent.append(xid)
            continue
        top = hyps[0]
        if (
            top.layer != "node"
            or top.signature == NOT_IN_CATALOG
            or not names_xid(top.signature, top.title, xid)
            or [e.line for e in top.evidence] != [1]
        ):
            unnamed.append((xid, top.signature, top.title))
        assert all(h.signature != NOT_IN_CATALOG for h in hyps), xid
    assert not silent, f"silent Xid lines: {silent}"
    assert not unnamed, f"Xids without a node hypothesis naming them: {unnamed}"


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS) + sorted(MORE_WRAPPERS))
@pytest.mark.parametrize("xid", UNDOCUMENTED)
def test_undocumented_xid_is_named_not_silent(
    engine: Engine, tmp_path: Path, wrapper: str, xid: int
) -> None:
    template = {**WRAPPERS, **MORE_WRAPPERS}[wrapper]
    hyps = run_line(engine, tmp_path, template.format(line=driver_line(xid)))
    assert [h.signature for h in hyps] == [NOT_IN_CATALOG]
    (hyp,) = hyps
    assert hyp.layer == "node"
    assert "not in the catalog" in hyp.title
    assert hyp.captures.get("xid") == str(xid)
    assert hyp.captures.get("pci") == PCI
    assert [e.line for e in hyp.evidence] == [1]
    assert f"): {xid}," in hyp.evidence[0].text


@pytest.mark.parametrize("wrapper", sorted(MORE_WRAPPERS))
@pytest.mark.parametrize("xid", (13, 31, 45, 48, 79, 94, 109, 119, 140, 145, 154))
def test_other_wrappers(engine: Engine, tmp_path: Path, wrapper: str, xid: int) -> None:
    hyps = run_line(engine, tmp_path, MORE_WRAPPERS[wrapper].format(line=driver_line(xid)))
    assert hyps and hyps[0].layer == "node"
    assert names_xid(hyps[0].signature, hyps[0].title, xid), (hyps[0].signature, hyps[0].title)
    assert hyps[0].captures.get("xid") == str(xid)


def test_pre_pci_prefix_format(engine: Engine, tmp_path: Path) -> None:
    """Older drivers print the bus id without 'PCI:' ('NVRM: Xid (0000:01:00): 13, ...')."""
    for xid in (9, 13, 31, 56, 200):
        line = (
            f"May 6 00:38:27 host kernel: [ 4909.922970] NVRM: Xid (0000:01:00): {xid}, 0005 0000"
        )
        hyps = run_line(engine, tmp_path, line)
        assert hyps, xid
        assert hyps[0].captures.get("xid") == str(xid)


def test_the_real_xid_79_line(engine: Engine, tmp_path: Path) -> None:
    line = "NVRM: Xid (PCI:0000:1b:00): 79, pid=1234, name=python3, GPU has fallen off the bus."
    for template in {**WRAPPERS, **MORE_WRAPPERS}.values():
        hyps = run_line(engine, tmp_path, template.format(line=line))
        assert hyps[0].signature == "gpu-fallen-off-the-bus"
        assert all(h.signature != NOT_IN_CATALOG for h in hyps)


def test_fatal_xid_explains_the_xid_45_that_follows(engine: Engine, tmp_path: Path) -> None:
    text = "\n".join(
        WRAPPERS["dmesg"].format(line=line)
        for line in (
            f"NVRM: Xid (PCI:{PCI}): 48, An uncorrectable double bit error (DBE) has been detected",
            f"NVRM: Xid (PCI:{PCI}): 45, pid=4242, name=python3, Ch 00000008",
        )
    )
    hyps = run_line(engine, tmp_path, text)
    assert hyps[0].signature == "nvidia-xid-48-double-bit-ecc"
    assert "nvidia-xid-45-preemptive-cleanup" in [x.signature for x in hyps[0].explains]
    assert "nvidia-xid-45-preemptive-cleanup" not in [h.signature for h in hyps]


@pytest.mark.parametrize(
    ("action", "branch"),
    [
        ("0x1 (GPU Reset Required)", "gpu-reset-required"),
        ("0x2 (Node Reboot Required)", "node-reboot-required"),
        ("0x3 (Drain P2P)", "drain-p2p"),
        ("0x4 (Drain and Reset)", "drain-and-reset"),
    ],
)
def test_xid_154_names_the_recovery_action(
    engine: Engine, tmp_path: Path, action: str, branch: str
) -> None:
    line = f"NVRM: Xid (PCI:{PCI}): 154, GPU recovery action changed from 0x0 (None) to {action}"
    hyps = run_line(engine, tmp_path, WRAPPERS["journalctl-short-iso"].format(line=line))
    assert hyps[0].signature == "nvidia-xid-154-recovery-action-changed"
    favoured = [d.branch for d in hyps[0].differential if d.favoured]
    assert favoured == [branch]
    assert hyps[0].fixes[0].likely
