"""Evaluation harness: pass@k, bootstrap intervals, long-context grids, run comparison."""
