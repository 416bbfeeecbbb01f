# gpuhost: the two commands a newcomer needs are `make demo` and `make test`.
# Everything here installs what it needs on a fresh Debian 12 machine as root.
SHELL := /bin/bash
PYTHON ?= $(if $(wildcard /usr/bin/python3),/usr/bin/python3,python3)
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: help setup test test-unit test-integration demo lint clean
help:
	@echo "make setup      create .venv with gpuhost and its test tools (idempotent)"
	@echo "make test       unit + plan tests, then the sandbox integration tests"
	@echo "make demo       bring up a sandbox fleet, provision it, print the audit"
	@echo "make sandbox-up HOSTS=N / make sandbox-down"
	@echo "make bench      audit speed against the floor and Ansible (20 and 50 hosts)"
	@echo "make bench-converged  audit and rerun of 4 converged hosts against the floor"

# make setup: .venv from requirements.lock (exact versions, sha256 hashes), then gpuhost itself
# (editable, no dependencies). Heals: a .venv whose interpreter is missing or broken is made
# anew. Quick when done: the stamp holds the hash of the lock and pyproject.toml it installed.
# The interpreter is Debian's python3 (what users have) unless PYTHON= names another.
LOCK := requirements.lock
setup:
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || \
	  { echo "==> installing python3-venv"; apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv python3-pip >/dev/null; }
	@if ! $(PY) -c 1 2>/dev/null; then \
	  echo "==> creating $(VENV) with $$($(PYTHON) -c 'import sys; print(sys.executable, sys.version.split()[0])')"; \
	  rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); fi
	@want=$$(cat $(LOCK) pyproject.toml | sha256sum | cut -d' ' -f1); \
	if [ "$$(cat $(VENV)/.setup-done 2>/dev/null)" != "$$want" ]; then \
	  echo "==> installing $(LOCK) and gpuhost into $(VENV)"; \
	  $(PY) -m pip install -q --disable-pip-version-check --require-hashes -r $(LOCK) && \
	  $(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e . && \
	  echo "$$want" > $(VENV)/.setup-done; fi

# make lock: refresh requirements.lock from pyproject.toml (newest versions its ranges allow),
# with pip-tools in a throw-away virtualenv. Commit the result after `make test` passes.
.PHONY: lock
lock:
	@rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv && .lock-venv/bin/pip install -q pip-tools
	.lock-venv/bin/pip-compile -q --upgrade --generate-hashes --allow-unsafe --strip-extras \
	  --extra test --all-build-deps --no-emit-index-url -o $(LOCK) pyproject.toml
	@rm -rf .lock-venv

# Every test tree (pyproject.toml's testpaths): the product's tests, the sandbox's own
# (simulator, fake packages, fleet) and the Vagrant/Molecule file checks.
TEST_TREES = tests sandbox/tests vagrant/tests

# The README's test command: unit and plan tests (seconds), then the sandbox integration
# tests, the QEMU VM test and the Molecule scenario (tests/integration/test_molecule.py). Installs everything it needs on a
# fresh Debian 12 machine. pytest runs TEST_WORKERS processes (pytest-xdist; each drives a
# private sandbox fleet of its own, see conftest.py); `make test TEST_WORKERS=0` runs one.
# It ends with where the time went (tests/timing_plugin.py; the JSON in $(TIMINGS)).
# CORPUS_CHECK: optional command run first that checks facts/parsers.py against a corpus of
# real captured outputs (CI runs the team's corpus checker as a step of its own).
CORPUS_CHECK ?=
TEST_WORKERS ?= 2
TIMINGS ?= build/test-timings.json
PYTEST_WORKERS = $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
test: setup deps
	@# the fake NVIDIA artifacts (CPU: packages, signatures) and the sandbox's roots and
	@# mirrors (downloads, mmdebstrap) share nothing: built side by side, both before pytest
	@$(MAKE) --no-print-directory -j2 nvidia-artifacts sandbox-caches
ifneq ($(strip $(CORPUS_CHECK)),)
	$(CORPUS_CHECK)
endif
	@mkdir -p $(dir $(TIMINGS))
	GPUHOST_TIMINGS=$(TIMINGS) $(PY) -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) $(TEST_TREES)

test-unit: setup deps
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) -m "not integration and not vm" $(TEST_TREES)

test-integration: setup deps nvidia-artifacts
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) -m integration $(TEST_TREES)

lint: setup
	$(VENV)/bin/ruff check facts gpuhost roles deploys inventories sandbox tests vagrant/tests conftest.py

# The README's first command: a sandbox fleet of real SSH hosts (simulated GPUs),
# provisioned by deploys/gpu_host.py, then audited. The fleet stays up to explore:
# `make sandbox-down` removes it.
DEMO_HOSTS ?= 6
DEMO_OL ?= 2
# one Ubuntu 24.04 host (u24-06), with the stock traits unattended-upgrades and containerd
DEMO_UBUNTU ?= 1
# the third host runs Debian 13 (d13-03: a real trixie root), the first two Debian 12
DEMO_SPEC ?= {"3": {"os": "debian13"}, "u24-06": {"traits": ["unattended-upgrades", "distro-containerd"]}}
demo: setup deps nvidia-artifacts
	@echo "==> [1/4] sandbox fleet: $(DEMO_HOSTS) hosts (Debian 12 and 13, $(DEMO_OL) Oracle Linux, $(DEMO_UBUNTU) Ubuntu), real sshd each"
	@python3 -m sandbox up --hosts $(DEMO_HOSTS) --ol $(DEMO_OL) --ubuntu $(DEMO_UBUNTU) \
	  --docker-hosts 1 --spec '$(DEMO_SPEC)'
	@echo "==> [2/4] provision: pyinfra -y inventories/sandbox.py deploys/gpu_host.py"
	@$(VENV)/bin/pyinfra -y inventories/sandbox.py deploys/gpu_host.py || \
	  echo "==> some hosts failed (see above); the others are provisioned"
	@echo "==> [3/4] second run on the converged fleet: expect no changes"
	@$(VENV)/bin/pyinfra -y inventories/sandbox.py deploys/gpu_host.py 2>&1 | grep -E "Grand total|error" || true
	@echo "==> [4/4] audit (read-only): gpuhost audit inventories/sandbox.py"
	@$(PY) -m gpuhost.cli audit inventories/sandbox.py --html demo-audit.html \
	  --json demo-audit.json; \
	  echo "==> audit exit status $$? (0: fleet as wanted). Report: demo-audit.html, demo-audit.json"
	@echo "==> the fleet is still up: python3 -m sandbox status | make sandbox-down"

# Each mk/*.mk fragment adds the Debian packages its part needs to APT_PACKAGES
# and its own targets; `make deps` installs what is missing in one apt call.
APT_PACKAGES :=
include $(sort $(wildcard mk/*.mk))

.PHONY: deps
deps:
	@missing=$$(for p in $(sort $(APT_PACKAGES)); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "==> apt-get install $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends $$missing >/dev/null; \
	fi

# Removes only what git ignores (the virtualenv, caches, build output, demo reports); never a
# file you wrote. The sandbox's caches in /var/cache/gpuhost stay (remove that folder by hand).
clean:
	git clean -fdXq
	@echo "==> removed what git ignores (.venv, caches, build output)"
