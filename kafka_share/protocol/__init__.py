"""Sans-IO Kafka wire protocol: typed messages <-> bytes, framing and version negotiation.

Modules: ``messages`` (generated message classes), ``primitives`` (wire
types), ``headers`` (request/response headers), ``api_keys`` (API keys and
version negotiation), ``codec`` (``KafkaCodec`` framing + correlation).
"""
