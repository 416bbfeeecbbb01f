# Fleet metrics and alert rules (docs/metrics.md): `gpuhost audit --prom`, alerts/gpuhost.rules.yml.
# prometheus: its promtool checks the metrics (`promtool check metrics`) and tests the shipped
# rules (`promtool check rules`, `promtool test rules`) in tests/unit/test_prom.py. Debian 12 ships promtool only inside the server package (2.42.0).
APT_PACKAGES += prometheus

.PHONY: alerts
alerts:  ## regenerate alerts/gpuhost.rules.yml from gpuhost/reports/alerts.py
	$(PY) -m gpuhost.reports.alerts > alerts/gpuhost.rules.yml
