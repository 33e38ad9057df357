"""Every output format: tables, YAML/JSON, markdown, the HTML report and its figures, the
Prometheus rules and Grafana dashboard."""
