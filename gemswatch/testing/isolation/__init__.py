"""gemswatch.testing.isolation: candidates out of the judge's process.

The judge (a pytest session of the correctness suite) loads no candidate
code: each candidate file is loaded in a worker process of its own
(:mod:`.worker`), and the judge calls it through :class:`RemoteCandidate`
(:mod:`.judge`), which moves arguments and results as plain bytes
(:mod:`.transport`) and checks inputs, results and exceptions on its side.
Imports torch and ``gemswatch.override``; never ``gemswatch.watch``.
"""

from .judge import CandidateCrashed, RemoteCandidate, WorkerSource, stage_output_fds

__all__ = ["CandidateCrashed", "RemoteCandidate", "WorkerSource", "stage_output_fds"]
