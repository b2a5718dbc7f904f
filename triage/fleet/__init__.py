"""Fleet integrations built on the engine facade and the history: node-problem-detector node checks,
Prometheus metrics, CI annotations, batch triage over archives and the fleet view. The core pipeline
never imports this package."""
