"""Before it breaks: launch-configuration lint (`triage lint`) and the node evidence probe
(`triage probe`). Both read the same knowledge base as log triage: a lint finding is a signature's
`config:` fingerprint (or version-aware env/flag knowledge extracted from the engine's source)."""

from triage.preflight.model import Finding, Item, Launch

__all__ = ["Finding", "Item", "Launch"]
