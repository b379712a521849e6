"""gemswatch: a save-to-verdict loop for Triton operator kernels.

Importing this package is cheap: it does not import torch, triton or the
operator library. Import ``gemswatch.gems`` for the operators.
"""

__version__ = "0.1.0"
