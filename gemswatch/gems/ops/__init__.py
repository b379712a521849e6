"""The operator kernels, one family per module: Triton kernels, their launcher
and launch heuristics (``_launch``), the CUDA event timer and tuner used by
mm (``_timing``, ``_tune``)."""
