"""``gemswatch new OP [NAME]``: start a candidate from the current gems kernel.

The operator's family module (``gemswatch/gems/ops/<family>.py``) is found
by reading source files, never by importing them (the watcher must not load
torch). Its text becomes the new candidate with relative imports made
absolute and the operator's function renamed, and config.yaml gains the
mapping, with its comments kept.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import re
import tokenize
from pathlib import Path

__all__ = ["find_kernel_source", "make_candidate_source", "add_mapping", "NewCandidateError"]


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


def make_candidate_source(source: str, package: str, op: str, func: str, origin: str) -> str:
    """The kernel module's text as a standalone candidate implementing ``op`` as ``func``.

    Relative imports become absolute (``from . import x`` -> ``from
    <package> import x``) and every bare name ``op`` (not attributes such as
    ``torch.softmax``) is renamed to ``func``.
    """
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
