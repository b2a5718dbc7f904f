"""`--format prom`, `--prom-textfile` (one run and `--follow`), `--format gha` and `--format junit`:
each parsed back by what reads it (prometheus_client's text parser; the workflow-command syntax
GitHub's runner reads, unescaped; an XSD of the JUnit elements and attributes CI systems document,
and junitparser), on real logs from the corpus.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml, Skipped
from lxml import etree  # type: ignore[import-untyped]
from prometheus_client.parser import text_string_to_metric_families

from triage.api import Engine
from triage.cli import FORMATS
from triage.fleet.promfile import follow_textfile, write_textfile
from triage.models import EvidenceOut, Hypothesis, InputInfo, Report, Unrecognized
from triage.render.gha import ANNOTATIONS_PER_KIND, command, render_gha
from triage.render.junit import render_junit
from triage.render.prom import render_prom

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "corpus"
XID_LOG = CORPUS / "node" / "xid-94-31-43-dmesg-grep-gpu-node.log"  # 2 errors and a warning
HEALTHY_LOG = CORPUS / "healthy" / "dmesg-nvrm-open-module-580-load-h200.log"
XID79_LINE = "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus."
METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def triage(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "triage", "--no-history", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )


def test_new_formats_are_offered() -> None:
    assert {"prom", "gha", "junit"} <= set(FORMATS)


# -- Prometheus ----------------------------------------------------------------------------------


def parse_prom(text: str) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    """Metric family name -> samples, through the official client's parser; every family must
    have HELP and TYPE and follow the naming rules."""
    out: dict[str, list[tuple[str, dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        assert fam.documentation, fam.name
        assert fam.type in ("gauge", "counter"), fam.name
        assert METRIC_NAME.match(fam.name) and fam.name.startswith("triage_")
        out[f"{fam.name}:{fam.type}"] = [(s.name, dict(s.labels), s.value) for s in fam.samples]
        for s in fam.samples:
            assert all(LABEL_NAME.match(k) for k in s.labels)
    help_lines = [line for line in text.splitlines() if line.startswith("# HELP ")]
    type_lines = [line for line in text.splitlines() if line.startswith("# TYPE ")]
    assert len(help_lines) == len(type_lines) == len(out)
    return out


def test_prom_output_parses_with_prometheus_client(engine: Engine) -> None:
    report = engine.run([str(XID_LOG)])
    text = render_prom(report, now=1_700_000_000.25)
    families = parse_prom(text)
    hyps = families["triage_hypothesis:gauge"]
    assert {
        (labels["signature"], labels["layer"], labels["severity"]) for _, labels, _ in hyps
    } == {(h.signature, h.layer, h.severity) for h in report.hypotheses}
    assert all(name == "triage_hypothesis" and value == 1 for name, _, value in hyps)
    assert families["triage_unrecognized:gauge"] == [("triage_unrecognized", {}, 0.0)]
    assert families["triage_last_run_timestamp_seconds:gauge"][0][2] == 1_700_000_000.25
    # a counter's family drops the _total suffix; its sample keeps it
    assert families["triage_input_bytes:counter"] == [
        ("triage_input_bytes_total", {}, float(XID_LOG.stat().st_size))
    ]


def test_prom_label_values_are_escaped() -> None:
    weird = 'id "quoted" back\\slash\nnewline'
    report = Report(
        inputs=[InputInfo(name="x", lines=1, format="plain", bytes=3)],
        hypotheses=[
            Hypothesis(
                rank=1,
                signature=weird,
                title="t",
                layer="node",
                severity="error",
                status="open",
                score=1.0,
                evidence=[],
            )
        ],
    )
    (sample,) = parse_prom(render_prom(report))["triage_hypothesis:gauge"]
    assert sample[1]["signature"] == weird


def test_format_prom_and_prom_textfile_from_the_cli(tmp_path: Path) -> None:
    target = tmp_path / "triage.prom"
    proc = triage("--format", "prom", "--prom-textfile", str(target), str(XID_LOG))
    assert proc.returncode == 1, proc.stderr  # the exit status still says a failure was found
    printed = parse_prom(proc.stdout)
    written = parse_prom(target.read_text())
    assert printed["triage_hypothesis:gauge"] == written["triage_hypothesis:gauge"]
    assert len(printed["triage_hypothesis:gauge"]) == 3
    assert [p.name for p in tmp_path.iterdir()] == ["triage.prom"]  # no temporary file left
    assert oct(target.stat().st_mode & 0o777) == "0o644"


def _complete(text: str) -> bool:
    """A textfile as the collector must see it: whole, ending with the last family."""
    return text.endswith("\n") and "triage_input_bytes_total " in text


def test_textfile_is_never_seen_half_written(tmp_path: Path) -> None:
    """A reader polls the file while a writer replaces it with texts of very different sizes:
    every read is one of the texts written, whole."""
    target = tmp_path / "triage.prom"
    texts = []
    for n in (1, 400, 4000):
        report = Report(
            inputs=[InputInfo(name="x", lines=1, format="plain", bytes=n)],
            hypotheses=[
                Hypothesis(
                    rank=i,
                    signature=f"signature-{i:05d}",
                    title="t",
                    layer="node",
                    severity="error",
                    status="open",
                    score=1.0,
                    evidence=[],
                )
                for i in range(n)
            ],
        )
        texts.append(render_prom(report, now=1.0))
    assert not _complete(texts[2][: len(texts[2]) // 2])  # the check does catch a torn read
    write_textfile(target, texts[0])
    stop = threading.Event()
    errors: list[str] = []
    reads = 0

    def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            seen = target.read_text()
            reads += 1
            if seen not in texts:
                errors.append(f"read {len(seen)} characters, not a text written")

    thread = threading.Thread(target=reader)
    thread.start()
    deadline = time.monotonic() + 2.0
    writes = 0
    while time.monotonic() < deadline:
        write_textfile(target, texts[writes % 3])
        writes += 1
    stop.set()
    thread.join()
    assert not errors, errors[:3]
    assert writes > 20 and reads > 20, (writes, reads)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["triage.prom"]


def test_follow_keeps_the_textfile_current(engine: Engine, tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text(HEALTHY_LOG.read_text())
    target = tmp_path / "triage.prom"
    stop = threading.Event()
    out = io.StringIO()
    result: list[int] = []
    thread = threading.Thread(
        target=lambda: result.append(
            follow_textfile(target, [str(log)], engine, out, interval=0.1, stop=stop)
        )
    )
    thread.start()
    torn: list[str] = []

    def metrics() -> dict[str, list[tuple[str, dict[str, str], float]]]:
        text = target.read_text()
        if not _complete(text):
            torn.append(text)
        return parse_prom(text)

    def wait_for(
        predicate: object, what: str
    ) -> dict[str, list[tuple[str, dict[str, str], float]]]:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if target.exists():
                fams = metrics()
                if callable(predicate) and predicate(fams):
                    return fams
            time.sleep(0.05)
        raise AssertionError(f"textfile never showed {what}: {target.read_text()}")

    try:
        size = HEALTHY_LOG.stat().st_size
        first = wait_for(
            lambda f: f["triage_input_bytes:counter"][0][2] == size, "the healthy log's bytes"
        )
        assert first["triage_hypothesis:gauge"] == []
        stamp = first["triage_last_run_timestamp_seconds:gauge"][0][2]
        with log.open("a") as fh:
            fh.write(f"[99999.000001] {XID79_LINE}\n")
        later = wait_for(
            lambda f: any(
                labels.get("signature") == "gpu-fallen-off-the-bus"
                for _, labels, _ in f["triage_hypothesis:gauge"]
            ),
            "the Xid 79 hypothesis",
        )
        assert later["triage_input_bytes:counter"][0][2] > size
        assert later["triage_last_run_timestamp_seconds:gauge"][0][2] > stamp
    finally:
        stop.set()
        thread.join(timeout=30)
    assert result == [1]  # an error-severity hypothesis was followed
    assert '"signature": "gpu-fallen-off-the-bus"' in out.getvalue()  # the JSON lines still flow
    assert not torn
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kern.log", "triage.prom"]


# -- GitHub Actions ------------------------------------------------------------------------------

_COMMAND = re.compile(r"^::(?P<kind>error|warning|notice)(?: (?P<props>[^:]*))?::(?P<data>.*)$")


def _unescape_data(text: str) -> str:
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def _unescape_property(text: str) -> str:
    return _unescape_data(text.replace("%3A", ":").replace("%2C", ","))


def parse_command(line: str) -> tuple[str, dict[str, str], str]:
    """A workflow command as the runner reads it: `::kind k=v,k=v::data`, unescaped."""
    m = _COMMAND.match(line)
    assert m, line
    props = {}
    if m["props"]:
        for pair in m["props"].split(","):
            key, _, value = pair.partition("=")
            assert key in ("file", "line", "title", "col", "endLine", "endColumn"), pair
            props[key] = _unescape_property(value)
    return m["kind"], props, _unescape_data(m["data"])


def test_gha_annotations_point_at_evidence_lines(engine: Engine) -> None:
    report = engine.run([str(XID_LOG)])
    lines = render_gha(report).splitlines()
    parsed = [parse_command(line) for line in lines]
    expected = [
        (("error" if h.severity == "error" else "warning"), e.input, e.line, h.signature)
        for h in report.hypotheses
        for e in h.evidence
    ]
    assert [(k, p["file"], int(p["line"]), p["title"].split()[1]) for k, p, _ in parsed] == expected
    source = XID_LOG.read_text().splitlines()
    for (_, props, data), hyp_line in zip(parsed, expected, strict=True):
        assert source[hyp_line[2] - 1].strip() in data  # the evidence line is the message
        assert props["title"].startswith("triage: ")


def test_gha_escaping_round_trips() -> None:
    text = "100% of a,b: c\r\nnext line"
    line = command("error", text, file="runs/a:b,c.log", line=7, title="t: x, y")
    assert "\n" not in line and "\r" not in line
    assert line.startswith("::error file=runs/a%3Ab%2Cc.log,line=7,title=t%3A x%2C y::")
    assert parse_command(line) == (
        "error",
        {"file": "runs/a:b,c.log", "line": "7", "title": "t: x, y"},
        text,
    )


def _report(n_errors: int, text: str = "boom") -> Report:
    return Report(
        inputs=[
            InputInfo(name="server.log", lines=n_errors, format="plain"),
            InputInfo(name="<stdin>", lines=3, format="plain"),
        ],
        hypotheses=[
            Hypothesis(
                rank=1,
                signature="cuda-out-of-memory",
                title="CUDA out of memory",
                layer="engine",
                severity="error",
                status="open",
                score=1.0,
                evidence=[
                    EvidenceOut(input="server.log", line=i + 1, text=text) for i in range(n_errors)
                ],
            )
        ],
        unrecognized=[
            Unrecognized(input="<stdin>", line=3, text="RuntimeError: odd", fingerprint="f")
        ],
    )


def test_gha_caps_annotations_and_log_text_cannot_start_a_command() -> None:
    report = _report(15, text="x\n::add-mask::secret\r\n::stop-commands::tok")
    lines = render_gha(report).splitlines()
    kinds = [parse_command(line)[0] for line in lines]
    assert kinds.count("error") == ANNOTATIONS_PER_KIND
    # the unrecognized line, then the note about the 5 errors left out
    assert kinds[-2:] == ["notice", "notice"]
    assert parse_command(lines[-1])[2] == "5 more annotation(s) not shown; see the job summary"
    assert "file" not in parse_command(lines[-2])[1]  # stdin has no file to point at
    assert all(line.startswith(("::error ", "::notice ", "::notice::")) for line in lines)
    assert parse_command(lines[0])[2].endswith("x\n::add-mask::secret\\x0d\n::stop-commands::tok")


def test_gha_writes_the_job_summary(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary)}
    proc = triage("--format", "gha", str(XID_LOG), env=env)
    assert proc.returncode == 1
    assert proc.stdout.startswith("::error file=")
    text = summary.read_text()
    assert text.startswith("earlier step\n")
    assert "**triage:** most likely" in text and "nvidia-xid-94-contained-ecc-error" in text
    healthy = triage("--format", "gha", str(HEALTHY_LOG), env=env)
    assert healthy.returncode == 0
    assert healthy.stdout == "::notice title=triage::no known failure found in the log\n"


# -- JUnit ---------------------------------------------------------------------------------------

# The JUnit XML elements and attributes that Jenkins, GitLab and the common test reporters document
# (testsuites > testsuite > properties/testcase > failure/error/skipped/system-out/system-err).
JUNIT_XSD = """<?xml version="1.0" encoding="UTF-8"?>
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" elementFormDefault="qualified">
  <xs:complexType name="problem">
    <xs:simpleContent>
      <xs:extension base="xs:string">
        <xs:attribute name="message" type="xs:string"/>
        <xs:attribute name="type" type="xs:string"/>
      </xs:extension>
    </xs:simpleContent>
  </xs:complexType>
  <xs:element name="testsuites">
    <xs:complexType>
      <xs:sequence>
        <xs:element ref="testsuite" minOccurs="0" maxOccurs="unbounded"/>
      </xs:sequence>
      <xs:attribute name="name" type="xs:string"/>
      <xs:attribute name="tests" type="xs:nonNegativeInteger"/>
      <xs:attribute name="failures" type="xs:nonNegativeInteger"/>
      <xs:attribute name="errors" type="xs:nonNegativeInteger"/>
      <xs:attribute name="skipped" type="xs:nonNegativeInteger"/>
      <xs:attribute name="time" type="xs:decimal"/>
      <xs:attribute name="timestamp" type="xs:dateTime"/>
    </xs:complexType>
  </xs:element>
  <xs:element name="testsuite">
    <xs:complexType>
      <xs:sequence>
        <xs:element name="properties" minOccurs="0">
          <xs:complexType>
            <xs:sequence>
              <xs:element name="property" minOccurs="0" maxOccurs="unbounded">
                <xs:complexType>
                  <xs:attribute name="name" type="xs:string" use="required"/>
                  <xs:attribute name="value" type="xs:string" use="required"/>
                </xs:complexType>
              </xs:element>
            </xs:sequence>
          </xs:complexType>
        </xs:element>
        <xs:element name="testcase" minOccurs="0" maxOccurs="unbounded">
          <xs:complexType>
            <xs:sequence>
              <xs:element name="skipped" minOccurs="0">
                <xs:complexType>
                  <xs:attribute name="message" type="xs:string"/>
                </xs:complexType>
              </xs:element>
              <xs:element name="error" type="problem" minOccurs="0" maxOccurs="unbounded"/>
              <xs:element name="failure" type="problem" minOccurs="0" maxOccurs="unbounded"/>
              <xs:element name="system-out" type="xs:string" minOccurs="0"/>
              <xs:element name="system-err" type="xs:string" minOccurs="0"/>
            </xs:sequence>
            <xs:attribute name="name" type="xs:string" use="required"/>
            <xs:attribute name="classname" type="xs:string"/>
            <xs:attribute name="file" type="xs:string"/>
            <xs:attribute name="line" type="xs:nonNegativeInteger"/>
            <xs:attribute name="time" type="xs:decimal"/>
            <xs:attribute name="assertions" type="xs:nonNegativeInteger"/>
          </xs:complexType>
        </xs:element>
        <xs:element name="system-out" type="xs:string" minOccurs="0"/>
        <xs:element name="system-err" type="xs:string" minOccurs="0"/>
      </xs:sequence>
      <xs:attribute name="name" type="xs:string" use="required"/>
      <xs:attribute name="tests" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="failures" type="xs:nonNegativeInteger"/>
      <xs:attribute name="errors" type="xs:nonNegativeInteger"/>
      <xs:attribute name="skipped" type="xs:nonNegativeInteger"/>
      <xs:attribute name="time" type="xs:decimal"/>
      <xs:attribute name="timestamp" type="xs:dateTime"/>
      <xs:attribute name="hostname" type="xs:string"/>
      <xs:attribute name="id" type="xs:string"/>
      <xs:attribute name="package" type="xs:string"/>
      <xs:attribute name="file" type="xs:string"/>
    </xs:complexType>
  </xs:element>
</xs:schema>
"""


def validate_junit(text: str) -> JUnitXml:
    schema = etree.XMLSchema(etree.fromstring(JUNIT_XSD.encode()))
    doc = etree.fromstring(text.encode("utf-8"))
    schema.assertValid(doc)
    return JUnitXml.fromstring(text.encode("utf-8"))


def test_junit_one_case_per_input_or_run_directory(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "grid-07"
    run.mkdir(parents=True)
    shutil.copy(XID_LOG, run / "dmesg.log")
    shutil.copy(
        CORPUS / "healthy" / "vllm-0.10-qwen2-7b-a100-startup-wrapped.log", run / "server.log"
    )
    proc = triage("--format", "junit", f"{run}/", str(HEALTHY_LOG))
    assert proc.returncode == 1, proc.stderr
    xml = validate_junit(proc.stdout)
    (suite,) = list(xml)
    assert (suite.tests, suite.failures, suite.errors) == (2, 1, 0)
    cases = {case.name: case for case in suite}
    assert set(cases) == {str(run), str(HEALTHY_LOG)}
    failures = [r for r in cases[str(run)].result if isinstance(r, Failure)]
    # the two error hypotheses fail the run; the Xid 43 warning does not
    assert [f.type for f in failures] == [
        "nvidia-xid-94-contained-ecc-error",
        "nvidia-xid-31-mmu-fault",
    ]
    assert f"{run}/dmesg.log:12: " in failures[0].text
    assert "What to try:" in failures[0].text
    assert "nvidia-xid-43-channel-stopped" in (cases[str(run)].system_out or "")
    assert cases[str(HEALTHY_LOG)].is_passed


def test_junit_unrecognized_skipped_and_hostile_text_stay_valid() -> None:
    report = _report(2, text="bad \x00\x07 bytes \ud800 and ]]> <tag> & \x1b[31mred")
    report.inputs.append(InputInfo(name="gone.log", lines=0, format="plain", skipped="unreadable"))
    xml = validate_junit(render_junit(report, ["server.log", "-", "gone.log"]))
    cases = {case.name: case for case in next(iter(xml))}
    assert set(cases) == {"server.log", "<stdin>", "gone.log"}
    (oom,) = cases["server.log"].result
    assert isinstance(oom, Failure) and oom.type == "cuda-out-of-memory"
    assert "]]> <tag> &" in oom.text and "\\x00\\x07" in oom.text
    (unknown,) = cases["<stdin>"].result
    assert isinstance(unknown, Failure) and unknown.type == "unrecognized"
    assert "RuntimeError: odd" in unknown.text
    (skip,) = cases["gone.log"].result
    assert isinstance(skip, Skipped) and "unreadable" in (skip.message or "")


@pytest.mark.parametrize("fmt", ["gha", "junit"])
def test_formats_redact_secrets(fmt: str) -> None:
    token = "hf_" + "".join(chr(ord("a") + (i * 7) % 26) for i in range(34))
    report = _report(1, text=f"HF_TOKEN={token} CUDA out of memory")
    text = render_gha(report) if fmt == "gha" else render_junit(report, ["server.log"])
    assert token not in text


def test_node_check_writes_its_window_metrics(tmp_path: Path) -> None:
    target = tmp_path / "triage.prom"
    log = CORPUS / "node" / "gpu-fallen-off-bus-multiline-no-xid.log"
    proc = subprocess.run(
        [sys.executable, "-m", "triage", "node-check", "--prom-textfile", str(target), str(log)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert (proc.returncode, proc.stdout) == (1, "gpu-fallen-off-the-bus: Xid 79 on 0000:b3:00.0\n")
    fams = parse_prom(target.read_text())
    assert [labels["signature"] for _, labels, _ in fams["triage_hypothesis:gauge"]] == [
        "gpu-fallen-off-the-bus"
    ]
    assert fams["triage_input_bytes:counter"][0][2] == log.stat().st_size
    # a directory that is not there: the check's verdict is unchanged, a note goes to stderr
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "triage",
            "node-check",
            "--prom-textfile",
            str(tmp_path / "no" / "x.prom"),
            str(log),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 1 and "No such file or directory" in proc.stderr
