"""Per-task checks that run in sandboxes: oracle, negative controls, resource fit, policy pass rate."""
