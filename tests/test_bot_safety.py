"""Nothing from an issue, a log or a webhook is executed: no shell, eval, exec, pickle, YAML."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
BOT_FILES = [*sorted((ROOT / "triage" / "bot").glob("*.py")), ROOT / "triage" / "redact.py"]
FORBIDDEN = re.compile(
    r"\bsubprocess\b|\bos\.system\b|\bos\.popen\b|\bshell\s*=\s*True|(?<![\w.])eval\(|(?<![\w.])exec\(|"
    r"\bpickle\b|\bmarshal\b|yaml\.load\(|\bjinja2?\b|\bTemplate\(|__import__\(|compile\([^)]*['\"]exec"
)


def test_no_execution_primitives_in_the_bot() -> None:
    assert BOT_FILES
    for path in BOT_FILES:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            assert not FORBIDDEN.search(line), f"{path.name}:{number}: {line.strip()}"


def test_workflow_never_interpolates_untrusted_fields() -> None:
    workflow = (ROOT / "examples" / "github-workflow.yml").read_text()
    assert 'triage bot github --event "$GITHUB_EVENT_PATH"' in workflow
    for field in (
        "github.event.issue.body",
        "github.event.issue.title",
        "github.event.comment.body",
    ):
        assert "${{ " + field not in workflow and "${{" + field not in workflow
    assert "issues: write" in workflow
