"""The Prometheus exporter: metric families, the cached exposition, what it shows of the config."""
