"""config.yaml as text: the line of every key in the parsed node tree, and
one ConfigIssue for a YAML syntax error (which has no tree, so its key is
read from indentation)."""

from __future__ import annotations

import re
from typing import Any

import yaml

from .model import ConfigIssue

__all__: list[str] = []  # helpers for load_config only


def _line_map(node: yaml.Node, prefix: tuple, out: dict[tuple, int], dups: list) -> None:
    """Record the 1-based line of every mapping key, keyed by its key path."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for knode, vnode in node.value:
            key = knode.value if isinstance(knode, yaml.ScalarNode) else str(knode.value)
            line = knode.start_mark.line + 1
            if key in seen:
                dups.append((prefix + (key,), line, seen[key]))
            seen[key] = line
            out[prefix + (key,)] = line
            _line_map(vnode, prefix + (key,), out, dups)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out[prefix + (i,)] = item.start_mark.line + 1
            _line_map(item, prefix + (i,), out, dups)


def _keyname(path: tuple) -> str:
    """A key path as shown in messages: ``operators.softmax.tests``, ``preload[1]``."""
    parts = []
    for p in path:
        if isinstance(p, int):
            parts.append(f"[{p}]")
        else:
            s = str(p)
            parts.append(("." if parts else "") + (s if s.replace("_", "").isalnum() else repr(s)))
    return "".join(parts)


_YAML_KEY = re.compile(r"""^[ \t]*(?:-[ \t]+)?(?P<key>"[^"]*"|'[^']*'|[^\s'"#{\[][^:#]*?)[ \t]*:(?:[ \t]|$)""")


def _key_at_line(text: str, line: int) -> tuple:
    """The key path that line ``line`` (1-based) of ``text`` sits under, read
    from indentation alone (the text does not parse, so there is no tree)."""
    stack: list[tuple[int, str]] = []
    for i, raw in enumerate(text.splitlines()[:line], start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" \t"))
        m = _YAML_KEY.match(raw)
        if m is None:
            if i == line:
                while stack and stack[-1][0] >= indent:
                    stack.pop()
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group("key").strip("'\"")))
    return tuple(k for _, k in stack)


def _yaml_issue(e: yaml.YAMLError, text: str, name: str) -> ConfigIssue:
    """One line for a YAML syntax error: where the broken construct starts,
    the key it belongs to, and what to do about it."""
    problem = (getattr(e, "problem", None) or str(e).splitlines()[0]).strip()
    context = (getattr(e, "context", None) or "").strip()
    mark = getattr(e, "problem_mark", None)
    start = getattr(e, "context_mark", None)
    line = mark.line + 1 if mark is not None else None
    opened = {"flow mapping": ("{", "}"), "flow sequence": ("[", "]")}
    what = next((k for k in opened if k in context), None)
    if what is not None and start is not None:
        # An unclosed `{` or `[` is reported where the parser gave up (often
        # the next line); the fix belongs on the line that opened it.
        line = start.line + 1
        o, c = opened[what]
        at = f" at line {mark.line + 1}" if mark is not None else ""
        msg = f"YAML syntax error in the `{o}...{c}` opened on this line: {problem}{at}"
        fix = f"separate its items with `,` and close it with `{c}`"
    elif "quoted scalar" in context and start is not None:
        line = start.line + 1
        msg = f"YAML syntax error: the quote opened on this line is never closed ({problem})"
        fix = "close the quote"
    elif "'\\t'" in problem:
        msg = "YAML syntax error: a tab in the indentation"
        fix = "indent with spaces, not tabs"
    elif "mapping values are not allowed" in problem:
        msg = f"YAML syntax error: {problem} (a second `: ` on one line)"
        fix = "put the nested key on its own, indented line, or quote the value"
    elif "expected <block end>" in problem or "block mapping" in context:
        msg = f"YAML syntax error: the indentation does not match the keys above ({problem})"
        fix = "indent the key like its siblings, with spaces"
    else:
        msg = f"YAML syntax error: {problem}" + (f" ({context})" if context else "")
        fix = "fix the YAML at that line"
    key = _key_at_line(text, line) if line else ()
    return ConfigIssue(_keyname(key) if key else "(yaml)", line, msg, fix, name)
