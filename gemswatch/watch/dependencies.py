"""Which mapped candidates re-run when some other file changes.

A candidate depends on its local imports (read from its source, never by
importing it), on its operators' test and benchmark files and on the
conftests above them; a symlinked candidate also on the file it points to. The index is rebuilt for a file whenever its bytes
are read for a run; it is queried for every changed path that is not
itself a candidate.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Iterable

from .config import Config
from .mapping import Candidate, CandidateMap, local_imports

__all__ = ["DependencyIndex"]


class DependencyIndex:
    """candidate path -> the files whose change re-runs it; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._deps: dict[str, set[Path]] = {}

    def index(self, cand: Candidate, source: bytes, config: Config, cmap: CandidateMap) -> None:
        """Record the dependencies of ``cand``, whose bytes are ``source``."""
        deps = local_imports(source, cand.path, [config.project, config.watch]) | cmap.selection_files(cand.ops)
        if cand.path.is_symlink():  # an edit of the file it points to is a save of it
            deps.add(cand.path.resolve())
        with self._lock:
            self._deps[str(cand.path)] = deps

    def scan(self, candidates: Iterable[Candidate], config: Config, cmap: CandidateMap) -> None:
        """Index every given candidate that can be read (without running anything)."""
        for c in candidates:
            try:
                data = c.path.read_bytes()
            except OSError:
                continue
            self.index(c, data, config, cmap)

    def dependents(self, path: Path) -> list[str]:
        """The candidates (their absolute paths) that depend on ``path``."""
        p = Path(path).resolve()
        with self._lock:
            return [k for k, deps in self._deps.items() if p in deps]

    def importers(self, path: Path, candidates: Iterable[Candidate], config: Config, cmap: CandidateMap) -> list[str]:
        """The candidates that import ``path``, looked for again: a helper
        created after the candidate that imports it was indexed is found by
        indexing again; one that a candidate names in an import the index
        cannot follow (the candidate does not parse yet) by the import's text."""
        cands = list(candidates)
        self.scan(cands, config, cmap)
        found = self.dependents(path)
        if found:
            return found
        stem = re.escape(Path(path).stem)
        names_it = re.compile(rf"^\s*(?:from\s+[\w.]*\b{stem}\b|from\s+\.+\s+import\s.*\b{stem}\b|import\s.*\b{stem}\b)",
                              re.MULTILINE)
        out = []
        for c in cands:
            try:
                text = c.path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if names_it.search(text):
                out.append(str(c.path))
        return out

    def forget(self, key: str) -> None:
        with self._lock:
            self._deps.pop(key, None)

    def files(self) -> set[Path]:
        """Every file some candidate depends on."""
        with self._lock:
            return set().union(*self._deps.values()) if self._deps else set()
