"""`python -m triage` runs the CLI."""

from triage.cli import main

main()
