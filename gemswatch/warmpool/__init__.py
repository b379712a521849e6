"""gemswatch.warmpool: the warm pool server.

One interpreter imports the heavy modules (torch, triton, pytest, the
operator library) once and forks a fresh pytest process per stage
(:mod:`.server`). The watcher runs ``server.py`` by path in the stages'
interpreter, which need not have gemswatch installed, so the server imports
the standard library only, and nothing here may import the rest of
gemswatch. The watcher's side of the protocol is
:mod:`gemswatch.watch.stage.warm_pool` (when to start or restart a pool:
:mod:`gemswatch.watch.stage.warm`).
"""
