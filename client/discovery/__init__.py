"""Heavy-hitter discovery without a candidate list (open domains of strings)."""

from __future__ import annotations

from ldptel.client.discovery.pem import Discovery, PrefixExtendingMethod

__all__ = ["Discovery", "PrefixExtendingMethod"]
