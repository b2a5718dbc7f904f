"""The optional LLM step (docs/llm.md): ask the user's own OpenAI-compatible model about what the
knowledge base cannot explain, grounded in the knowledge base and checked line by line.

One module per stage: `evidence` (the windows that may be sent), `prompt` (candidates, schema,
request body), `client` (the HTTP call), `answer` (the checks), `cache`, `step` (when to ask and
what is attached to the report), `options` and `cli` (the command line), `draft` (signature drafts
from the unknown queue). Only `triage.cli`, `triage.history.cli` and renderers of an attached
`report.llm` know it exists; nothing in the pipeline imports it.
"""
