# The sandbox fleet: real SSH hosts on this machine (see sandbox/__init__.py).
# make sandbox-up HOSTS=N [OL=k] [UBUNTU=u] [DOCKER_HOSTS=d] [SPEC='{"gpu-01": {...}}']
# make sandbox-down | sandbox-status | sandbox-base | sandbox-mirror
APT_PACKAGES += mmdebstrap openssh-client iproute2 util-linux dpkg-dev apt-utils gnupg \
                rpm dnf python3-dnf createrepo-c ca-certificates systemd-container

HOSTS ?= 4
OL ?= 0
UBUNTU ?= 0
DOCKER_HOSTS ?= 1
SPEC ?=
SANDBOX := python3 -m sandbox

.PHONY: sandbox-up sandbox-down sandbox-status sandbox-base sandbox-mirror
sandbox-up: deps setup nvidia-artifacts
	$(SANDBOX) up --hosts $(HOSTS) --ol $(OL) --ubuntu $(UBUNTU) --docker-hosts $(DOCKER_HOSTS) $(if $(SPEC),--spec '$(SPEC)')

sandbox-down:
	$(SANDBOX) down

sandbox-status:
	$(SANDBOX) status

sandbox-base: deps
	$(SANDBOX) base --ol

# every base root, OS layer and mirror a fleet of any spec needs (make test builds them first)
.PHONY: sandbox-caches
sandbox-caches: deps setup
	$(PY) -m sandbox caches

sandbox-mirror: deps
	$(SANDBOX) mirror
