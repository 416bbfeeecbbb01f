"""Only verify's bounded wait for the NVLink fabric, 5 s (for tests/integration/test_fabric.py)."""

from gpuhost.roles import verify

verify.fabric_completed(name="Every GPU's NVLink fabric state is Completed (5 s)", wait_s=5)
