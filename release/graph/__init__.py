"""REGAL (graph level): computation graphs, performance model, BRKGA, baselines."""
