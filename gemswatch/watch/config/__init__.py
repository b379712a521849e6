"""config.yaml: the model and its validation.

Every problem is one line that names the file, the line, the key, what is
wrong and how to fix it. Validation never imports a candidate or the
operator library: it reads YAML and looks at the file system.

``model`` holds Config and the issue types, ``yamltext`` the line numbers
and YAML syntax errors, ``checks`` and ``tables`` one check per top-level
key, and ``load`` the load_config that runs them.
"""

from __future__ import annotations

from .checks import default_preload
from .load import load_config
from .model import (
    DEFAULT_TIMEOUTS,
    LEVELS,
    POLICIES,
    CandidateRule,
    Config,
    ConfigError,
    ConfigIssue,
    OperatorSpec,
)
from .tables import split_selection

__all__ = [
    "DEFAULT_TIMEOUTS",
    "POLICIES",
    "LEVELS",
    "CandidateRule",
    "Config",
    "ConfigError",
    "ConfigIssue",
    "OperatorSpec",
    "default_preload",
    "load_config",
    "split_selection",
]
