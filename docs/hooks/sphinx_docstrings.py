"""Griffe extensions: docstrings written for Sphinx read well as Markdown; ``#:`` comments document constants.

Docstrings here show usage as doctest sessions (``>>> call()`` and its output) anywhere in
the text, not only under an ``Examples:`` heading, and a ``::`` paragraph ends with an indented
literal block (reStructuredText's convention). Markdown would read ``>>>`` as nested quotes and
the output ``[1, 2]`` as a link, and would run an indented block into the paragraph; this wraps
each session in a ``pycon`` fence and each literal block in a plain fence before mkdocstrings
renders the docstring, and Sphinx roles (``:class:`~rocketkafka.Message```) become code. The source
files are not changed.

Constants are documented the Sphinx way here, by a ``#:`` comment on the lines above the
assignment (``tests/architecture/test_public_surface.py`` asks one of every exported constant);
Griffe reads only a string after the assignment, so the comment becomes the attribute's docstring.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_PROMPT = re.compile(r"^(\s*)(>>>|\.\.\.)( |$)")
_FLAGS = re.compile(r"\s*#\s*doctest:.*$")  # directives for the doctest runner, not for readers


def fence_sessions(text: str) -> str:
    """``text`` with every doctest session (prompts and the output lines after them) fenced as ``pycon``."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        match = _PROMPT.match(lines[i])
        if match is None or match.group(2) != ">>>":
            out.append(lines[i])
            i += 1
            continue
        indent = match.group(1)
        block = []
        while i < len(lines) and lines[i].strip() and lines[i].startswith(indent):
            block.append(_FLAGS.sub("", lines[i][len(indent):]))
            i += 1
        out += [f"{indent}```pycon", *(indent + line for line in block), f"{indent}```"]
    return "\n".join(out)


def fence_literal_blocks(text: str) -> str:
    """``text`` with each indented block after a line ending in ``::`` fenced (the ``::`` becomes ``:``)."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        line = lines[i]
        if not line.rstrip().endswith("::") or line.strip().startswith(">>>"):
            out.append(line)
            i += 1
            continue
        base = len(line) - len(line.lstrip())
        out.append(line.rstrip()[:-1])
        i += 1
        block: list[str] = []
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > base):
            block.append(lines[i])
            i += 1
        while block and not block[-1].strip():
            block.pop()
        while block and not block[0].strip():
            block.pop(0)
        if not any(b.strip() for b in block):
            continue
        depth = min(len(b) - len(b.lstrip()) for b in block if b.strip())
        pad = " " * base
        out += ["", f"{pad}```text", *(pad + b[depth:] if b.strip() else "" for b in block), f"{pad}```", ""]
    return "\n".join(out)


_ROLE = re.compile(r":(?:py:)?(?:class|mod|func|meth|attr|data|exc|obj|const):`(~?)([^`<]+?)(?: <([^>]+)>)?`")


def plain_roles(text: str) -> str:
    """Sphinx roles as code: ``:class:`~a.b.C``` -> `` `C` ``, ``:mod:`a.b``` -> `` `a.b` ``."""
    def code(match: re.Match) -> str:
        tilde, target = match.group(1), (match.group(3) or match.group(2)).strip()
        return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"

    return _ROLE.sub(code, text)


class DoctestBlocks(griffe.Extension):
    """Fence doctest sessions and ``::`` literal blocks of every docstring griffe reads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain_roles(fence_sessions(fence_literal_blocks(obj.docstring.value)))


class CommentDocs(griffe.Extension):
    """Give an attribute without a docstring the ``#:`` comment lines right above its assignment."""

    def on_attribute_instance(self, *, attr: griffe.Attribute, **kwargs: Any) -> None:
        if attr.docstring is not None or not attr.lineno or attr.filepath is None:
            return
        try:
            lines = attr.filepath.read_text().splitlines()  # type: ignore[union-attr]
        except OSError:
            return
        comment: list[str] = []
        number = attr.lineno - 2
        while number >= 0 and lines[number].strip().startswith("#:"):
            comment.insert(0, lines[number].strip()[2:].strip())
            number -= 1
        if comment:
            attr.docstring = griffe.Docstring("\n".join(comment), lineno=number + 2, parent=attr)
