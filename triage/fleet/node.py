"""`triage node-check`'s verdict in node-problem-detector's custom-plugin protocol.

NPD runs a plugin every `invoke_interval` and reads two things back: the exit status (0 OK,
1 NonOK, 2 Unknown) and standard output, trimmed and cut to `max_output_length` characters, as the
condition's message. This module turns the triage of a window (`triage.fleet.window`) into those
two things: NonOK when a node-layer hypothesis of the family (or of any family) has the severity
asked for; the message names the top such hypothesis by signature id, with its Xid and PCI address
when the evidence has them. The message carries nothing that changes from one run to the next
(no time, no count), so that with `enable_message_change_based_condition_update` a condition is
updated when the diagnosis changes and never because the clock moved.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass

from triage.api import Engine, InputSpec
from triage.fleet.families import NOT_NODE_HEALTH, Family, family_of
from triage.fleet.window import Window
from triage.kb.records import Signature
from triage.models import Hypothesis, Report

OK, NON_OK, UNKNOWN = 0, 1, 2
DEFAULT_MAX_OUTPUT = 80  # NPD's default max_output_length
SEVERITY_ORDER = ("info", "warning", "error")
_XID_IN_ID = re.compile(r"(?:^|-)xid-(\d+)(?:-|$)")


@dataclass
class Verdict:
    status: int  # OK, NON_OK or UNKNOWN
    message: str  # one line, at most the configured length
    report: Report | None = None
    top: Hypothesis | None = None


def triage_windows(engine: Engine, windows: Sequence[Window]) -> Report:
    """Triage the windows as one report (each window is one input)."""
    specs = [InputSpec(w.name, stream=io.BytesIO(w.data)) for w in windows]
    return engine.run_inputs(specs)


def node_hypotheses(
    report: Report, engine: Engine, family: Family | None, min_severity: str = "error"
) -> list[Hypothesis]:
    """The report's node-health hypotheses of the family (any family when None), best first."""
    floor = SEVERITY_ORDER.index(min_severity)
    out = []
    for hyp in report.hypotheses:
        sig = engine.kb.by_id.get(hyp.signature)
        if sig is None or hyp.signature in NOT_NODE_HEALTH:
            continue
        fam = family_of(sig)
        if fam is None or (family is not None and fam != family.name):
            continue
        if hyp.severity in SEVERITY_ORDER and SEVERITY_ORDER.index(hyp.severity) >= floor:
            out.append(hyp)
    return out


def xid_of(hyp: Hypothesis, sig: Signature | None = None) -> str | None:
    """The Xid the evidence names, else the one the signature is about: its id or an alias
    (`nvidia-xid-48-double-bit-ecc`; `gpu-fallen-off-the-bus` is `nvidia-xid-79-fallen-off-bus`)."""
    xid = hyp.captures.get("xid")
    if xid:
        return xid
    for name in (hyp.signature, *(sig.aliases if sig else ())):
        m = _XID_IN_ID.search(name)
        if m:
            return m.group(1)
    return None


def message(hyp: Hypothesis, sig: Signature | None = None, limit: int = DEFAULT_MAX_OUTPUT) -> str:
    """`nvidia-xid-94-contained-ecc-error: Xid 94 on 0000:00:08`, shortened to fit `limit`:
    the device goes first, then the Xid, then the id is cut."""
    xid = xid_of(hyp, sig)
    device = hyp.captures.get("pci")
    details = [f"Xid {xid}" if xid else "", f"on {device}" if device else ""]
    for shown in (details, details[:1], []):
        text = " ".join(d for d in shown if d)
        line = f"{hyp.signature}: {text}" if text else hyp.signature
        if len(line) <= limit:
            return line
    return hyp.signature[:limit]


def verdict(
    report: Report,
    engine: Engine,
    family: Family | None,
    *,
    min_severity: str = "error",
    limit: int = DEFAULT_MAX_OUTPUT,
) -> Verdict:
    found = node_hypotheses(report, engine, family, min_severity)
    if found:
        top = found[0]
        return Verdict(NON_OK, message(top, engine.kb.by_id.get(top.signature), limit), report, top)
    what = f"no {family.name} failure" if family else "no node failure"
    return Verdict(OK, f"OK: {what} in the window"[:limit], report)


def unknown(reason: str, limit: int = DEFAULT_MAX_OUTPUT) -> Verdict:
    """A check that could not look: NPD sets the condition to Unknown with this message. NPD
    cuts bytes, not characters, so the cut here is in UTF-8 bytes (a path may be non-ASCII)."""
    text = " ".join(f"Unknown: {reason}".split())
    return Verdict(UNKNOWN, text.encode("utf-8")[:limit].decode("utf-8", "ignore"))
