"""Client telemetry (KIP-714): the consumer's metrics pushed to the cluster.

``otlp`` writes OTLP ``MetricsData``; ``collector`` names the consumer's metrics
as Java does and keeps the delta bookkeeping; ``sender`` is the sans-IO
protocol (GetTelemetrySubscriptions, PushTelemetry) the engine drives.
"""
