"""Fuzz the bot's webhook path: verify -> delivery id / event -> parse -> job, as the server runs it.

    python fuzz/fuzz_webhook.py -max_total_time=60 -timeout=2 -rss_limit_mb=1024 [CORPUS_DIR]

Targets `triage.bot.webhook` (verify_signature, delivery_id, event_name, parse_payload) and
`triage.bot.events.job_from_event`. Each input becomes a secret, a set of headers and a body:
a forged signature must never verify, the correct one must, and every step after verification
either returns a job or a reason, or raises only the errors the server handles.
Half of the inputs build a structured payload (issue, sender, labels, number with random JSON
types) so the fuzzer reaches past the first `isinstance` checks.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
from typing import Any

import atheris

with atheris.instrument_imports(include=["triage"]):
    from triage.bot.events import IssueJob, job_from_event
    from triage.bot.webhook import delivery_id, event_name, parse_payload, verify_signature

_HEADERS = (
    "X-Hub-Signature-256",
    "X-Gitea-Signature",
    "X-Forgejo-Signature",
    "X-GitHub-Event",
    "X-Gitea-Event",
    "X-GitHub-Delivery",
    "X-Forgejo-Delivery",
    "Content-Type",
)
_EVENTS = ("issues", "issue_comment", "ping", "push", "")
_ACTIONS = ("opened", "edited", "reopened", "created", "closed", "")


def _value(fdp: atheris.FuzzedDataProvider, depth: int = 0) -> Any:
    kind = fdp.ConsumeIntInRange(0, 8 if depth < 3 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return fdp.ConsumeBool()
    if kind == 2:
        return fdp.ConsumeInt(8)
    if kind == 3:
        return fdp.ConsumeFloat()
    if kind == 4:
        return fdp.ConsumeUnicodeNoSurrogates(20)
    if kind == 5:
        return fdp.ConsumeIntInRange(-3, 100000)
    if kind == 6:
        return [_value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3))]
    return {
        fdp.PickValueInList(["name", "login", "type", "body", "number", "full_name", "x"]): _value(
            fdp, depth + 1
        )
        for _ in range(fdp.ConsumeIntInRange(0, 3))
    }


def _structured(fdp: atheris.FuzzedDataProvider) -> bytes:
    payload: dict[str, Any] = {"action": fdp.PickValueInList(list(_ACTIONS))}
    issue: dict[str, Any] = {}
    for key in ("number", "title", "body", "state", "labels", "user", "pull_request"):
        if fdp.ConsumeBool():
            issue[key] = _value(fdp)
    payload["issue"] = issue if fdp.ConsumeProbability() < 0.9 else _value(fdp)
    for key in ("sender", "comment", "repository"):
        if fdp.ConsumeBool():
            payload[key] = _value(fdp)
    if fdp.ConsumeBool():
        payload["repository"] = {"full_name": "owner/repo"}
    return json.dumps(payload).encode()


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    secret = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 24))
    headers = {
        fdp.PickValueInList(list(_HEADERS)): fdp.ConsumeUnicodeNoSurrogates(80)
        for _ in range(fdp.ConsumeIntInRange(0, 5))
    }
    event = fdp.PickValueInList(list(_EVENTS))
    body = _structured(fdp) if fdp.ConsumeBool() else fdp.ConsumeBytes(fdp.remaining_bytes())

    # 1. a forged or random signature never verifies
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    given = {k.lower(): v for k, v in headers.items()}
    if verify_signature(secret, body, headers):
        claimed = (
            given.get("x-forgejo-signature")
            or given.get("x-gitea-signature")
            or given.get("x-hub-signature-256", "").removeprefix("sha256=")
        )
        if claimed.strip() != expected:
            raise AssertionError("a wrong signature verified")
    # 2. the right signature verifies (when there is a secret)
    signed = {"X-Hub-Signature-256": "sha256=" + expected, "X-GitHub-Event": event}
    if verify_signature(secret, body, signed) != bool(secret):
        raise AssertionError("the correct signature was refused")
    # 3. headers are read without raising, bounded
    if len(delivery_id(headers)) > 100 or len(event_name(headers)) > 60:
        raise AssertionError("header value not bounded")
    # 4. parsing and the job: only the errors the server catches may come out
    try:
        payload = parse_payload(body)
    except (ValueError, UnicodeDecodeError):
        return
    job = job_from_event(event, payload, bot_login="triage-bot", delivery=delivery_id(headers))
    if not isinstance(job, (IssueJob, str)):
        raise AssertionError("job_from_event returned something else")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
