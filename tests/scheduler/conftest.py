"""Make the scheduler test builders importable (tests use importlib import mode)."""
