"""pytest plugins and helpers for the gems correctness and benchmark suites.

Conftests load the plugins explicitly (``pytest_plugins``); there is no
pytest11 entry point, which would clash with an upstream checkout's options.
"""
