# Fake NVIDIA artifacts for the sandbox: local repo packages (apt + rpm), the NVIDIA
# Container Toolkit repos, Oracle-side RPM repos and the verify image.
# Built into /var/cache/gpuhost/nvidia/ (served at http://127.77.0.1:8000/nvidia/).
APT_PACKAGES += dpkg-dev apt-utils gnupg gpgv rpm createrepo-c dnf python3-dnf mmdebstrap runc dkms cpio

.PHONY: nvidia-artifacts nvidia-artifacts-force test-fake-packages
nvidia-artifacts: deps setup
	$(PY) -m sandbox.nvidia.build

nvidia-artifacts-force: deps setup
	$(PY) -m sandbox.nvidia.build --force

test-fake-packages: nvidia-artifacts
	$(PY) -m pytest -q sandbox/tests/test_fake_packages.py sandbox/tests/test_fake_packages_installed.py
