"""A running dagger's metrics: the exporter (`exporter.py`: Prometheus endpoint, StatsD push), the
Prometheus alerting rules (`alerts.yml`, with their unit tests in `alerts_test.yml`) and a Grafana
dashboard over the same series (`grafana-dashboard.json`)."""
