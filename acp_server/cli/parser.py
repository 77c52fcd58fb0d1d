"""The `talaria` command's argument parser class: a missing subcommand or action is answered
with the choices, not argparse's "required: env_command" (a name from our code, issue 28); and
its `--version` action. Imported only when a parser is built (`talaria acp` builds none)."""

from __future__ import annotations

import argparse
from typing import NoReturn

REQUIRED = "the following arguments are required: "


class VersionAction(argparse.Action):
    """`--version`, read from the package metadata only when asked for."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from talaria.acp_server.version import version

        print(f"talaria {version()}")
        parser.exit()


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose subparsers are Parsers too (argparse makes them `type(self)`)."""

    def error(self, message: str) -> NoReturn:
        if message.startswith(REQUIRED):
            missing = [name.strip() for name in message.removeprefix(REQUIRED).split(",")]
            for action in self._actions:
                if action.dest in missing or (action.metavar or "") in missing:
                    listed = choices(action)
                    if listed:
                        message = f"choose one of: {listed}"
                        break
        super().error(message)


def choices(action: argparse.Action) -> str:
    """`check (what it does)`, ... for a subcommand; `a, b, c` for a positional's choices."""
    if isinstance(action, argparse._SubParsersAction):
        helps = {a.dest: a.help for a in action._choices_actions}
        return "; ".join(f"{name} ({helps[name]})" if helps.get(name) else name
                         for name in action.choices)
    return ", ".join(map(str, action.choices or ()))


def subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """(command words, parser, its one-line help) for every subcommand under `parser`."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((name, sub, helps.get(name, "")))
                found += [(f"{name} {words}", p, h) for words, p, h in subparsers(sub)]
    return found


def fill_descriptions(parser: argparse.ArgumentParser) -> None:
    """A subcommand without a description gets its one-line help as one, so `--help` of
    every command says what it does."""
    for _, sub, help_text in subparsers(parser):
        if not sub.description and help_text:
            sub.description = help_text[0].upper() + help_text[1:] + "."
