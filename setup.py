"""Build hook for the optional C helper (everything else is in pyproject.toml).

`triage._userblank` blanks logged user text before the pattern scan (triage/usertext.py). It is
optional: without a C compiler the install goes on and triage scans those bytes too, with the same
results, more slowly."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "triage._userblank",
            ["triage/_userblank.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
