"""Only gpuhost's package-manager proxy step (for tests/integration/test_packages_locks_secrets.py)."""

from gpuhost.roles import proxy

proxy.configure()
