"""Fuzz the signature loader: random bytes as a signature file.

    python fuzz/fuzz_signature_loader.py -max_total_time=60 -timeout=2 -rss_limit_mb=1024 [CORPUS]

Two targets per input: `parse_yaml` + `Signature.model_validate` (only YAML and validation errors
may come out), and `load_signature_file` on the bytes written to a file (the entry point of
`triage kb lint` and of loading; it must report, never raise).
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["triage"]):
    import yaml
    from pydantic import ValidationError

    from triage.kb.load import load_signature_file, parse_yaml
    from triage.kb.schema import Signature

_DIR = Path(tempfile.mkdtemp(prefix="triage-fuzz-")) / "engine"
_DIR.mkdir()
_FILE = _DIR / "fuzz-probe.yaml"


def test_one_input(data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        try:
            parsed = parse_yaml(text)
        except yaml.YAMLError:
            parsed = None
        if isinstance(parsed, dict):
            with contextlib.suppress(ValidationError):
                Signature.model_validate(parsed)
    _FILE.write_bytes(data)
    sig, errors = load_signature_file(_FILE)
    if sig is None and not errors:
        raise AssertionError("no signature and no error")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
