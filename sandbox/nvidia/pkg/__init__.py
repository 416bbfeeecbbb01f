"""Builders for the sandbox's fake NVIDIA artifacts (see sandbox/nvidia/build.py)."""
