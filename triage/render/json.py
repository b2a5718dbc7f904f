"""The machine-readable report (`triage.report/1`), stable key order, for jq, tests and the bot."""

from __future__ import annotations

import json

from triage.models import Report


def render_json(report: Report, *, explain: bool = False) -> str:
    data = report.to_json_dict()
    if not explain:
        for hyp in data["hypotheses"]:
            hyp.pop("explain", None)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
