"""Make the scenario builder importable (tests use importlib import mode)."""
