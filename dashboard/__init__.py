"""The analysts' dashboard: campaigns, windows and trends with confidence bands, served as
server-rendered HTML with inline SVG (docs/dashboard.md). Reads the window documents the
aggregator stores; writes only browsers' sign-in sessions."""

from ldptel.dashboard.app import create_app

__all__ = ["create_app"]
