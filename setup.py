"""Build hooks that pyproject.toml cannot express: the optional C helpers, and the knowledge base.

`triage._userblank` blanks logged user text before the pattern scan (triage/usertext.py);
`triage._lineindex` builds each segment's line-break index (triage/read.py). Both are optional:
without a C compiler the install goes on and triage uses its Python/numpy paths, with the same
results, more slowly.

The knowledge base's source of truth is the top-level `signatures/` tree, which is not a Python
package. Every built wheel carries a copy of it as package data, `triage/data/signatures/`, so a
non-editable install (`pip install .`, a wheel, `pip install git+URL@tag`) diagnoses exactly as a
checkout does (docs/install.md). The copy is made at build time, never committed.
"""

import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
LAYERS = ("node", "harness", "engine", "model")


class BuildWithKnowledgeBase(build_py):
    """build_py that also copies `signatures/<layer>/*.yaml` into the wheel's `triage/data/`."""

    def run(self) -> None:
        super().run()
        source = HERE / "signatures"
        files = sorted(p for layer in LAYERS for p in (source / layer).glob("*.yaml"))
        if not files:
            # A wheel without its knowledge would diagnose nothing and say nothing: refuse it.
            raise SystemExit(
                f"build: no signature files under {source}: "
                "refusing to build a wheel without its knowledge base"
            )
        target = Path(self.build_lib) / "triage" / "data" / "signatures"
        if target.exists():
            shutil.rmtree(target)
        for path in files:
            dest = target / path.parent.name / path.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)


setup(
    cmdclass={"build_py": BuildWithKnowledgeBase},
    ext_modules=[
        Extension(
            "triage._userblank",
            ["triage/_userblank.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "triage._lineindex",
            ["triage/_lineindex.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ],
)
