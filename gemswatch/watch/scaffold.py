"""``gemswatch new OP [NAME]``: start a candidate from the current gems kernel.

The operator's family module (``gemswatch/gems/ops/<family>.py``) is found
by reading source files, never by importing them (the watcher must not load
torch). The part of its text the operator needs (its function and the
kernels, helpers, constants and imports that function reaches, nothing of
the family's other operators) becomes the new candidate, with relative
imports made absolute, the operator's function renamed and a docstring and
``__all__`` of its own; config.yaml gains the mapping, with its comments kept.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import re
import tokenize
from pathlib import Path

__all__ = ["find_kernel_source", "make_candidate_source", "add_mapping", "needed_source", "NewCandidateError"]


class NewCandidateError(Exception):
    """The candidate could not be created; the message says why and what to do."""


def _gems_ops_dir(module: str = "gemswatch.gems") -> Path:
    """The ops folder of the operator library, located without importing it."""
    top = module.split(".")[0]
    spec = importlib.util.find_spec(top)  # imports nothing below the top package
    if spec is None or not spec.submodule_search_locations:
        raise NewCandidateError(f"cannot find the package {top!r}: install it (pip install -e .)")
    base = Path(list(spec.submodule_search_locations)[0])
    for part in module.split(".")[1:]:
        base = base / part
    ops = base / "ops"
    if not ops.is_dir():
        raise NewCandidateError(f"{ops} does not exist: `gemswatch new` needs the gems kernel sources")
    return ops


def find_kernel_source(op: str, module: str = "gemswatch.gems") -> tuple[Path, str]:
    """(file, dotted package) of the module that defines ``op`` at top level."""
    ops_dir = _gems_ops_dir(module)
    known: list[str] = []  # every file is parsed once; these name the choices when op is missing
    for f in sorted(ops_dir.glob("*.py")):
        if f.name.startswith("_"):
            continue
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"))
        except (SyntaxError, OSError):
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                if node.name == op:
                    return f, f"{module}.ops"
                if not node.name.startswith("_"):
                    known.append(node.name)
    known.sort()
    raise NewCandidateError(f"no gems kernel defines {op!r}; known operators: {', '.join(known)}")


def _bound(node: ast.stmt) -> set[str]:
    """The module-level names a top-level statement defines."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _loads(nodes: list[ast.AST]) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _used(node: ast.stmt) -> set[str]:
    """The module-level names a statement reads. In a function, a name it
    binds (a parameter, an assignment, a loop variable) is its own, not the
    module's: ``mean: bool`` in a helper does not need the ``mean`` operator.
    Decorators, defaults and annotations are read where the function is
    defined."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return _loads([node])
    own: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.arg):
            own.add(n.arg)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            own.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not node:
            own.add(n.name)
    outside: list[ast.AST] = list(node.decorator_list)
    if isinstance(node, ast.ClassDef):
        outside += node.bases + [k.value for k in node.keywords]
    else:
        a = node.args
        outside += a.defaults + [d for d in a.kw_defaults if d is not None] + ([node.returns] if node.returns else [])
        outside += [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x is not None and x.annotation]
    return (_loads([node]) - own) | _loads(outside)


def needed_source(source: str, op: str, exported: str | None = None) -> str:
    """The statements of the module ``source`` that ``op``'s function needs:
    it and every top-level definition, constant and import it reaches,
    directly or through another (with the comments just above each), in
    their order; ``from __future__`` imports are kept, the module's
    docstring is not, and ``__all__`` becomes ``[exported]`` (or goes).
    Other statements are kept as they are, and what they read with them."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # the family's docstring
    definers: dict[str, list[ast.stmt]] = {}
    keep: list[ast.stmt] = []
    exports = None
    for node in body:
        names = _bound(node)
        if names == {"__all__"}:
            exports = node
            continue
        is_future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if not names or is_future:
            keep.append(node)  # not a definition: it runs, so it stays
        for name in names - {"annotations"} if is_future else names:
            definers.setdefault(name, []).append(node)
    wanted = [n for n in definers.get(op, []) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not wanted:
        raise NewCandidateError(f"the module defines no function {op!r}")
    todo = wanted + keep
    kept = {id(n) for n in todo}
    while todo:
        node = todo.pop()
        for name in _used(node):
            for d in definers.get(name, []):
                if id(d) not in kept:
                    kept.add(id(d))
                    todo.append(d)
    out: list[str] = []
    previous_end, previous_kept = 0, False
    for node in tree.body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
        if node is exports and exported:
            text = [f'__all__ = ["{exported}"]\n']
        elif id(node) in kept:
            text = lines[start:node.end_lineno]
        else:
            previous_end, previous_kept = node.end_lineno, False
            continue
        if previous_kept:
            lead = previous_end  # the lines between two kept statements, as they were
        else:
            lead = start
            while lead > previous_end and lines[lead - 1].lstrip().startswith("#"):
                lead -= 1  # the comment that introduces it
            if out:
                out.append("\n\n" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else "\n")
        out.extend(lines[lead:start] + text)
        previous_end, previous_kept = node.end_lineno, True
    return "".join(out)


def make_candidate_source(source: str, package: str, op: str, func: str, origin: str) -> str:
    """The kernel module's text as a standalone candidate implementing ``op`` as ``func``.

    Only what ``op`` needs is kept (:func:`needed_source`); relative imports
    become absolute (``from . import x`` -> ``from <package> import x``)
    and every bare name ``op`` (not attributes such as ``torch.softmax``) is
    renamed to ``func``. The candidate gets a docstring and ``__all__`` of
    its own.
    """
    source = needed_source(source, op, exported=func)
    pkg_parts = package.split(".")

    def absolute(match: re.Match) -> str:
        dots, rest = match.group(1), match.group(2)
        base = pkg_parts[: len(pkg_parts) - (len(dots) - 1)]
        target = ".".join(base + ([rest] if rest else []))
        return f"from {target} import"

    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            i = node.lineno - 1
            lines[i] = re.sub(r"from\s+(\.+)([\w.]*)\s+import", absolute, lines[i], count=1)
    text = "".join(lines)

    out = []
    prev = None
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME and tok.string == op and not (prev is not None and prev.string == "."):
            tok = tok._replace(string=func)
        out.append(tok)
        if tok.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            prev = tok
    body = tokenize.untokenize(out)
    header = (
        f"# Candidate for `{op}`, started from {origin} by `gemswatch new`.\n"
        f"# Edit the kernels below; gemswatch re-runs the pipeline on every save.\n"
        f'"""``{func}``: a candidate for ``{op}`` (from {origin}), with the kernels and helpers it uses."""\n\n'
    )
    return header + body


def add_mapping(config_path: Path, rel_file: str, op: str, func: str) -> None:
    """Append ``rel_file: {op: func}`` under ``candidates:`` keeping the file's comments."""
    import yaml

    text = config_path.read_text(encoding="utf-8")
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    entry_indent = "  "
    insert_at = None
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if k.value == "candidates":
                if isinstance(v, yaml.MappingNode) and v.value:
                    if v.flow_style:
                        raise NewCandidateError(
                            f"{config_path.name}: `candidates:` is written in flow style; add `{rel_file}: {{{op}: {func}}}` by hand"
                        )
                    first = v.value[0][0]
                    entry_indent = " " * first.start_mark.column
                    insert_at = v.end_mark.line if v.end_mark.column == 0 else v.end_mark.line + 1
                elif isinstance(v, yaml.ScalarNode) and v.value in ("", "null", "~"):
                    insert_at = k.start_mark.line + 1
                    lines = text.splitlines(keepends=True)
                    lines[k.start_mark.line] = "candidates:\n"
                    text = "".join(lines)
                else:
                    raise NewCandidateError(f"{config_path.name}: cannot add to `candidates:`; add `{rel_file}: {{{op}: {func}}}` by hand")
    block = f"{entry_indent}{rel_file}:\n{entry_indent}  {op}: {func}\n"
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    if insert_at is None:
        lines.append("\ncandidates:\n" + block)
    else:
        # after the last entry, before the blank lines and comments that
        # introduce the next key
        while insert_at > 0 and (lines[insert_at - 1].strip() == "" or lines[insert_at - 1].lstrip().startswith("#")):
            insert_at -= 1
        lines.insert(insert_at, block)
    config_path.write_text("".join(lines), encoding="utf-8")
