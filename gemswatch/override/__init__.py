"""gemswatch.override: the dynamic operator override protocol.

It owns swapping ``<module>.<op>`` for a candidate loaded from a file,
counting the candidate's calls and restoring the module
(:mod:`.registry`), executing a candidate file as a module
(:mod:`.loading`), the protocol's one exception (:mod:`.errors`), and the
``--override`` / ``--override-config`` grammar and options shared by every
pytest entry point (:mod:`.cli`). It targets any
module (``gemswatch.gems`` by default, ``flag_gems`` for an upstream
checkout) and knows nothing of pytest's plugins or the watcher: it must
never import ``gemswatch.testing``, ``gemswatch.watch`` or the operator
library (it imports the target module only when asked to install into it).
"""
