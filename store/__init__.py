"""The store layer: ldptel's data model in Redis, below both services.

Key names (keys), clients from a URL for one Redis or a Redis Cluster (connection), the
stream-entry codec the collector writes and the aggregator reads (codec), the campaign
registry (registry) and a private redis-server for development and tests (redis_server).
The collector and the aggregator import this layer and never each other
(docs/architecture.md).
"""
