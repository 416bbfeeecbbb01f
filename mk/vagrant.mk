# Real distributions: the QEMU/TCG Debian 12 VM (real kernel + systemd), the Molecule
# scenario against the sandbox fleet, and the Vagrant/Molecule files for real boxes.
# See vagrant/README.md.
APT_PACKAGES += qemu-system-x86 qemu-utils e2fsprogs mmdebstrap openssh-client curl ruby

.PHONY: vm-image vm-up vm-down test-vm molecule-sandbox test-vagrant-files
# Build (or reuse) the cached image in /var/cache/gpuhost/vm/ (about 70 s the first time).
vm-image: deps setup
	$(PY) vagrant/qemu/image.py

vm-up: vm-image
	$(PY) vagrant/qemu/vm.py up

vm-down:
	$(PY) vagrant/qemu/vm.py down

# Boots the VM (twice), converges it with deploys/gpu_host.py, reboots it for real.
test-vm: vm-image
	$(PY) -m pytest -v -m vm tests/vm

# molecule test -s sandbox (default driver, managed: false) against the sandbox fleet.
molecule-sandbox: deps setup
	cd vagrant && PATH="$(CURDIR)/$(VENV)/bin:$$PATH" molecule test -s sandbox

test-vagrant-files: setup
	$(PY) -m pytest -q vagrant/tests
