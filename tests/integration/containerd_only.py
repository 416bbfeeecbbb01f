"""Only gpuhost's optional containerd step (for tests/integration/test_containerd.py)."""

from gpuhost.roles import containerd

containerd.configure()
