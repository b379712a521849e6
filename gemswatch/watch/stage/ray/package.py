"""The project as a Ray ``working_dir`` package, for stages on other nodes.

The project's tests/, benchmark/, config and helper modules travel as one
zip that Ray keeps in the cluster by the hash of its contents: a project
that did not change since the last stage is not sent again, one that did
(a test edited while watching) is. Run folders, caches, version control and
virtual environments stay behind, and so does what the project's
``.gitignore`` or a ``.rayignore`` names. Ray refuses a package past its
size cap (512 MiB); the error says which folders to leave out.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

__all__ = ["EXCLUDES", "PackageError", "project_package"]

# gitignore-style patterns, on top of the project's .gitignore and .rayignore.
EXCLUDES = [
    ".gemswatch",
    ".git",
    ".venv",
    "venv",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    "*.egg-info",
    "*.pyc",
]

_lock = threading.Lock()  # stages start side by side; one packs at a time


class PackageError(Exception):
    """The project could not be packed or sent to the cluster."""


def project_package(project: Path) -> str:
    """The ``working_dir`` URI of ``project`` as it is now, sent to the
    cluster unless it is already there."""
    # The helper ray.init itself uses for a job's working_dir; a task's
    # runtime_env takes only a URI, so the upload is asked for here.
    from ray._private.runtime_env.working_dir import upload_working_dir_if_needed

    with _lock, tempfile.TemporaryDirectory(prefix="gemswatch-pack-") as scratch:
        try:
            env = upload_working_dir_if_needed(
                {"working_dir": str(project), "excludes": list(EXCLUDES)},
                include_gitignore=True,
                scratch_dir=scratch,
                logger=None,
            )
        except ValueError as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else "too large"
            raise PackageError(
                f"the project {project} cannot travel to the cluster: {first} "
                "(list large folders in a .rayignore file there)"
            ) from e
        except Exception as e:  # an upload that failed: the cluster's error, in one line
            raise PackageError(f"sending the project {project} to the cluster failed: {type(e).__name__}: {e}") from e
    return str(env["working_dir"])
