"""How window reports are built, as options: shared by `aggregator run`, `aggregator
candidates` and `report`."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ldptel.aggregator.reports import ReportOptions


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of how reports are built (shared by `aggregator run` and `report`)."""
    from ldptel.aggregator.consistency import ALIASES, METHODS

    parser.add_argument(
        "--consistency",
        default=os.environ.get("LDPTEL_CONSISTENCY", "norm-sub"),
        choices=[*METHODS, *ALIASES],
        help="post-processing of the estimates into consistent ones (default norm-sub)",
    )
    parser.add_argument(
        "--min-reports",
        type=int,
        default=os.environ.get("LDPTEL_MIN_REPORTS", "100"),
        metavar="N",
        help="below N reports a window says 'not enough reports' (default 100)",
    )


def report_options(args: argparse.Namespace) -> ReportOptions:
    from ldptel.aggregator.reports import ReportOptions

    return ReportOptions(consistency=args.consistency, min_reports=args.min_reports)
