# Rolling driver upgrades (docs/upgrades.md): `gpuhost upgrade`.
#   make upgrade UPGRADE_INVENTORY=inventories/prod.py [UPGRADE_CANARY=1] [UPGRADE_BATCH=25%] [UPGRADE_ARGS='--limit gpu']
#   make test-upgrade        unit + plan tests of the upgrade (seconds)
#   make test-upgrade-integration   6 sandbox hosts 550 -> 570 (root, ~30 min)
UPGRADE_INVENTORY ?= inventories/sandbox.py
UPGRADE_CANARY ?= 1
UPGRADE_BATCH ?= 25%
UPGRADE_ARGS ?=

.PHONY: upgrade test-upgrade test-upgrade-integration
upgrade: setup
	$(PY) -m gpuhost.cli upgrade $(UPGRADE_INVENTORY) --canary $(UPGRADE_CANARY) --batch $(UPGRADE_BATCH) $(UPGRADE_ARGS)

test-upgrade: setup
	$(PY) -m pytest -q tests/unit/test_rollout.py tests/plans/test_upgrade_plans.py

test-upgrade-integration: deps setup
	$(PY) -m pytest -v -m integration tests/integration/test_upgrade.py
