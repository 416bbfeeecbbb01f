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

# make bench-converged: on 4 converged sandbox hosts (3 Debian 12, 1 Oracle Linux 8; a
# private fleet, never the developers' own), `gpuhost audit` and a converged rerun of
# deploys/gpu_host.py against the floor, and their remote commands per host (issue 27 item 7).
# Results: bench/results/converged.md. Needs root. A few minutes.
BENCH_CONVERGED_RUNS ?= 3

.PHONY: bench-converged
bench-converged: deps setup
	$(PY) bench/converged.py --runs $(BENCH_CONVERGED_RUNS) --out bench/results/converged.md
