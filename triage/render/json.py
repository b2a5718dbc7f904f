"""The machine-readable report (`triage.report/1`), stable key order, for jq, tests and the bot."""

from __future__ import annotations

import json
import re

from triage.models import Report

# Characters a terminal would act on even inside a JSON string: DEL, C1 controls (8-bit CSI),
# bidi overrides and isolates, line/paragraph separators. Escaped as \uXXXX: still valid JSON.
_TERMINAL_UNSAFE = re.compile("[\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def render_json(report: Report, *, explain: bool = False) -> str:
    data = report.to_json_dict()
    if not explain:
        for hyp in data["hypotheses"]:
            hyp.pop("explain", None)
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return _TERMINAL_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"
