"""ldptel: telemetry under local differential privacy (README.md, docs/architecture.md).

The parts are subpackages: ldptel.client (protocol kernel and app SDK), ldptel.store (the
Redis data model), ldptel.collector, ldptel.aggregator, ldptel.analysis and ldptel.cli.
"""
