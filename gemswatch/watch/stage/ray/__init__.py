"""gemswatch.watch.stage.ray: the stages on a Ray cluster (docs/scale-out.md).

:class:`RayCluster` starts or joins the cluster of a session,
:class:`RayExecutor` runs each planned stage there as one Ray task holding
a whole GPU (or CPU slot), :mod:`.task` is what runs on the node and
:mod:`.package` sends the project to nodes that lack it. Ray is imported
only inside these modules' functions: importing this package does not
import Ray, and without Ray installed :class:`RayCluster` raises
:class:`RayUnavailable` with the line that says how to install it.
"""

from .cluster import INSTALL_HINT, RayCluster, RayUnavailable
from .executor import RayExecutor

__all__ = ["INSTALL_HINT", "RayCluster", "RayExecutor", "RayUnavailable"]
