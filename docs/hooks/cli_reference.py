"""MkDocs hook: the CLI reference is generated from the click commands themselves.

``reference/cli.md`` holds the marker ``<!-- cli-reference -->``; this hook replaces it with one
mkdocs-click section per subcommand of ``rocketkafka`` (``rocketkafka.tools.cli:main``), in the
order ``rocketkafka --help`` lists them. The root group loads some subcommands lazily
(``admin``, ``bench``, ``spark``, the sidecars), and mkdocs-click only walks the eagerly
registered ones, so each subcommand is located here through ``main.get_command`` -- the same
path the command line takes -- and documented from the module that defines it. A subcommand
that cannot be located fails the build. Options without a default show none (mkdocs-click would
print click's ``Sentinel.UNSET``).
"""

from __future__ import annotations

import sys
from typing import Any

import click

MARKER = "<!-- cli-reference -->"


def _located(command: click.Command) -> tuple[str, str]:
    """The module and attribute name under which ``command`` is defined."""
    module_name = command.callback.__module__ if command.callback is not None else ""
    module = sys.modules.get(module_name)
    for name, value in vars(module or object()).items():
        if value is command:
            return module_name, name
    raise LookupError(f"the click command {command.name!r} is not a module attribute of {module_name!r}")


def cli_sections() -> str:
    """Markdown with one mkdocs-click directive per ``rocketkafka`` subcommand."""
    from rocketkafka.tools.cli import main

    ctx = click.Context(main, info_name="rocketkafka")
    blocks = [_directive("rocketkafka.tools.cli", "main", "rocketkafka", depth=1, subcommands=False)]
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        if command is None:
            raise LookupError(f"rocketkafka lists {name!r} but cannot load it")
        module, attribute = _located(command)
        blocks.append(_directive(module, attribute, f"rocketkafka {name}", depth=1, subcommands=True))
    return "\n\n".join(blocks)


def _directive(module: str, attribute: str, prog_name: str, depth: int, subcommands: bool) -> str:
    lines = ["::: mkdocs-click", f"    :module: {module}", f"    :command: {attribute}",
             f"    :prog_name: {prog_name}", f"    :depth: {depth}", "    :style: table"]
    if subcommands:
        lines.append("    :list_subcommands: true")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_sections())


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    # mkdocs-click prints click 8.2's "no default" sentinel as a default: show nothing instead
    return html.replace("<code>Sentinel.UNSET</code>", "")
