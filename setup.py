"""Build hook for the optional C helpers (everything else is in pyproject.toml).

`triage._userblank` blanks logged user text before the pattern scan (triage/usertext.py);
`triage._lineindex` builds each segment's line-break index (triage/read.py). Both are optional:
without a C compiler the install goes on and triage uses its Python/numpy paths, with the same
results, more slowly."""

from setuptools import Extension, setup

setup(
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
    ]
)
