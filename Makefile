# gpuhost: the two commands a newcomer needs are `make demo` and `make test`.
# Everything here installs what it needs on a fresh Debian 12 machine as root.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: help setup test test-unit lint clean
help:
	@echo "make setup      create .venv with gpuhost and its test tools (idempotent)"
	@echo "make test       unit + plan tests, then the sandbox integration tests"
	@echo "make demo       bring up a sandbox fleet, provision it, print the audit"
	@echo "make sandbox-up HOSTS=N / make sandbox-down"
	@echo "make bench      audit speed against the floor and Ansible (20 and 50 hosts)"

setup: $(VENV)/.setup-done
$(VENV)/.setup-done: pyproject.toml
	@$(PYTHON) -m venv --help >/dev/null 2>&1 && $(PYTHON) -c 'import ensurepip' 2>/dev/null || \
	  { echo "==> installing python3-venv"; apt-get update -qq && apt-get install -y -qq python3-venv python3-pip >/dev/null; }
	@test -x $(PY) || { echo "==> creating $(VENV)"; $(PYTHON) -m venv $(VENV); }
	@echo "==> installing gpuhost and its test tools into $(VENV)"
	@$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@touch $@

test-unit: setup
	$(PY) -m pytest -q -m "not integration and not vm" tests

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

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
