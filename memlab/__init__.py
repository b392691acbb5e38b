"""`import memlab` in your own code: `memlab.track()` around a block (a notebook cell) and
`memlab.phase("eval")` to name a phase while `memlab profile` or `track()` measures.

The lab itself lives in the `lab` package; this is the small public surface of it.
"""

from lab import __version__
from lab.profile import phase, track

__all__ = ["__version__", "phase", "track"]
