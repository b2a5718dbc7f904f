"""triage as a tool for agents: an MCP server over stdio (`triage mcp`, docs/llm.md).

Needs the optional `mcp` package (`pip install 'triage[mcp]'`); nothing else imports this.
"""
