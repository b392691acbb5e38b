"""Memory snapshots, headless: load safely, summarize, and describe what was live at the peak.

    from lab.snapshots import open_summary
    [summary] = open_summary("dump_snapshot.pickle")
    summary.peak_bytes, summary.live_at_peak, summary.series(200)

Never imports textual, plotext, rich or torch (tests/unit/test_snapshots.py checks).
"""

from .load import ACCEPTS, SnapshotError, open_summary, read, summarize_result
from .summary import Allocation, Band, Oom, Series, SnapshotSummary, summarize
from .unpickle import RefusedPickle, load_plain

__all__ = ["ACCEPTS", "Allocation", "Band", "Oom", "RefusedPickle", "Series", "SnapshotError",
           "SnapshotSummary", "load_plain", "open_summary", "read", "summarize",
           "summarize_result"]
