"""The end-to-end suites: real processes and real pytest sessions.

pytester's in-process sessions forget every module they imported when they
end, and triton's native extension cannot be imported twice in one process
(the second import aborts it). The benchmark timer lives in the operator
library, so a session that takes the verdict watchlist imports triton:
import the library once here, before any such session, so it stays loaded.
"""

import gemswatch.gems  # noqa: F401
