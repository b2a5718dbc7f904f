"""The plain records a run uses and the pydantic models that validate and publish them agree,
field for field: signatures (`kb.records` / `kb.schema`) and reports (`models` /
`report_schema`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from triage import models, report_schema
from triage.api import Engine
from triage.kb import records, schema
from triage.kb.load import load_signatures

ROOT = Path(__file__).resolve().parent.parent

SIGNATURE_PAIRS = [
    (records.Signature, schema.Signature),
    (records.Pattern, schema.Pattern),
    (records.VersionRange, schema.VersionRange),
    (records.Applicability, schema.Applicability),
    (records.DifferentialCheck, schema.DifferentialCheck),
    (records.Fix, schema.Fix),
    (records.Provenance, schema.Provenance),
    (records.Examples, schema.Examples),
    (records.ConfigCheck, schema.ConfigCheck),
]
REPORT_PAIRS = [
    (models.Report, report_schema.Report),
    (models.InputInfo, report_schema.InputInfo),
    (models.Hypothesis, report_schema.Hypothesis),
    (models.EvidenceOut, report_schema.EvidenceOut),
    (models.ExplainedOut, report_schema.ExplainedOut),
    (models.FixOut, report_schema.FixOut),
    (models.DifferentialOut, report_schema.DifferentialOut),
    (models.Unrecognized, report_schema.Unrecognized),
    (models.SourceOut, report_schema.SourceOut),
]


def _plain(value: Any) -> Any:
    """A default as data: nested records and models both become dicts."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, BaseModel):
        return value.model_dump()
    return value


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return _plain(f.default)
    if f.default_factory is not dataclasses.MISSING:
        return _plain(f.default_factory())
    return "<required>"


@pytest.mark.parametrize(("record", "model"), SIGNATURE_PAIRS + REPORT_PAIRS)
def test_same_fields_order_and_defaults(record: type, model: type[BaseModel]) -> None:
    mine = [(f.name, _default(f)) for f in dataclasses.fields(record)]
    theirs = [
        (
            name,
            "<required>"
            if info.is_required()
            else _plain(info.get_default(call_default_factory=True)),
        )
        for name, info in model.model_fields.items()
    ]
    assert mine == theirs


def test_same_layers() -> None:
    assert records.LAYERS == schema.LAYERS


def test_every_signature_survives_the_record_round_trip() -> None:
    loaded = load_signatures()
    assert not loaded.errors and len(loaded.signatures) > 200
    for sig in loaded.signatures:
        data = sig.model_dump(by_alias=True, mode="json")
        assert records.Signature.from_dict(data).to_dict() == data, sig.id


def test_reports_are_valid_contract_objects(engine: Engine) -> None:
    logs = sorted((ROOT / "corpus").rglob("*.log"))[::10]
    for log in logs:
        report = engine.run([str(log)])
        data = report.to_json_dict()
        assert report_schema.validate_report(data) == data, log
        assert models.Report.from_json_dict(data).to_json_dict() == data, log


def test_a_run_never_imports_pydantic(tmp_path: Path) -> None:
    """Start-up: the compiled knowledge base and the report need no pydantic."""
    import subprocess
    import sys

    log = tmp_path / "x.log"
    log.write_text("ValueError: No available memory for the cache blocks.\n")
    code = (
        "import sys, runpy; sys.argv = ['triage', '--no-history', '--format', 'json', "
        f"{str(log)!r}]\n"
        "try:\n    runpy.run_module('triage', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "assert 'pydantic' not in sys.modules, 'pydantic imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
