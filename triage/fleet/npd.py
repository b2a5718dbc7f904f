"""`triage export npd`: a node-problem-detector custom-plugin-monitor configuration.

One permanent condition per signature family (`triage.fleet.families`), each set by a rule that
runs `triage node-check --family F`. The field names are those NPD's custom plugin monitor reads
(`plugin`, `pluginConfig` with `invoke_interval`, `timeout`, `max_output_length`, `concurrency`,
`enable_message_change_based_condition_update`; `source`, `metricsReporting`, `conditions` of
`type`/`reason`/`message`, `rules` of `type`/`condition`/`reason`/`path`/`args`/`timeout`).
NPD refuses a rule whose timeout exceeds the global one and a permanent rule whose condition has
no default, so every rule uses the global timeout and every condition is declared.
Message-change updates are on: node-check's message is deterministic, so it changes only when
the diagnosis does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage.fleet.families import FAMILIES, Family

SOURCE = "triage-custom-plugin-monitor"
DEFAULT_PATH = "/usr/local/bin/triage"


@dataclass
class ExportOptions:
    path: str = DEFAULT_PATH  # where NPD finds the triage executable
    interval: str = "60s"
    timeout: str = "30s"  # the first run on a node compiles the pattern database (seconds)
    max_output_length: int = 80
    concurrency: int = 1  # one check at a time: each reads the journal
    since: str | None = None  # one window for every family; None: each family's own
    units: list[str] = field(default_factory=list)
    journal_dir: Path | None = None
    families: Sequence[str] = ()  # a subset; empty: all


def reasons(fam: Family) -> tuple[str, str]:
    """(healthy reason, failure reason): `NoGPUPCIeFailure`, `GPUPCIeFailure`."""
    stem = fam.condition.removesuffix("Problem")
    return f"No{stem}Failure", f"{stem}Failure"


def rule_args(fam: Family, opts: ExportOptions) -> list[str]:
    args = ["node-check", "--family", fam.name, "--since", opts.since or fam.since]
    args += ["--max-output-length", str(opts.max_output_length)]
    for unit in opts.units:
        args += ["--unit", unit]
    if opts.journal_dir:
        args += ["--journal-dir", str(opts.journal_dir)]
    return args


def npd_config(opts: ExportOptions | None = None) -> dict[str, Any]:
    opts = opts or ExportOptions()
    chosen = [f for f in FAMILIES if not opts.families or f.name in opts.families]
    conditions = []
    rules = []
    for fam in chosen:
        healthy, failing = reasons(fam)
        conditions.append(
            {
                "type": fam.condition,
                "reason": healthy,
                "message": f"triage: no failure of {fam.title}",
            }
        )
        rules.append(
            {
                "type": "permanent",
                "condition": fam.condition,
                "reason": failing,
                "path": opts.path,
                "args": rule_args(fam, opts),
                "timeout": opts.timeout,
            }
        )
    return {
        "plugin": "custom",
        "pluginConfig": {
            "invoke_interval": opts.interval,
            "timeout": opts.timeout,
            "max_output_length": opts.max_output_length,
            "concurrency": opts.concurrency,
            "enable_message_change_based_condition_update": True,
        },
        "source": SOURCE,
        "metricsReporting": True,
        "conditions": conditions,
        "rules": rules,
    }


def render_npd(opts: ExportOptions | None = None) -> str:
    return json.dumps(npd_config(opts), indent=2) + "\n"
