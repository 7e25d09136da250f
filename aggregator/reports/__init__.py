"""Window reports: the window states of a campaign merged across shards and turned into
estimates with variance, standard error, confidence interval, a consistent estimate and a
significance flag per item, plus the privacy guarantee in numbers and words.

A report covers one (campaign, config id, privacy level, window): configs never mix. The
document stored per window (keys.report) holds the reports of every config seen in it.
Layout: `window` builds the document with one builder per kind of campaign (`categorical`,
`levels`, `open_domain`, `discovery`, `numeric`); `statistics` and `privacy` hold the
numbers and words they share; `document` the fields every report has.
"""

from ldptel.aggregator.reports.options import NOT_ENOUGH, OK, Candidates, ReportOptions
from ldptel.aggregator.reports.privacy import privacy_sentences
from ldptel.aggregator.reports.statistics import significance_z
from ldptel.aggregator.reports.window import build_window, list_windows, load_window, store_window

__all__ = [
    "NOT_ENOUGH",
    "OK",
    "Candidates",
    "ReportOptions",
    "build_window",
    "list_windows",
    "load_window",
    "privacy_sentences",
    "significance_z",
    "store_window",
]
