# make bench: the read-only audit's speed against the floor (pyinfra exec true, one ssh per
# host in parallel) and against Ansible (ansible-core from the venv), on 20 then 50 sandbox
# hosts. Results: bench/results/latest.md. Needs root (the sandbox). Takes about 10 minutes.
# chromium: the HTML audit report test opens the page in headless Chromium.
APT_PACKAGES += chromium openssh-client

BENCH_SIZES ?= 20,50
BENCH_RUNS ?= 5
BENCH_ANSIBLE_RUNS ?= 3

.PHONY: bench
bench: deps setup
	$(PY) bench/run.py --sizes $(BENCH_SIZES) --runs $(BENCH_RUNS) \
	  --ansible-runs $(BENCH_ANSIBLE_RUNS) --out bench/results/latest.md
