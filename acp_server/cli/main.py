"""The `talaria` command. Imports stay inside each subcommand so `talaria acp` starts fast
(argparse too: the doors editors launch build no parser)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from talaria.acp_server.cli import exits

if TYPE_CHECKING:
    import argparse

ACP_HINT = ("talaria acp: speaking the Agent Client Protocol on stdin/stdout; editors launch this. "
            "Try `talaria run \"...\"` or see `talaria --help`.")

LSP_HINT = ("talaria lsp: speaking the Language Server Protocol on stdin/stdout; editors launch "
            "this. See editors/README.md.")


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from talaria.acp_server.cli.parser import Parser, VersionAction, fill_descriptions

    parser = Parser(prog="talaria", description="A coding agent for your editor.",
                                     epilog=exits.HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run one task in the terminal", epilog=exits.HELP,
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         description="Run one task on the project in --cwd. Edits and commands "
                         "ask on the terminal\nfirst (an edit shows its diff); with no terminal "
                         "they are refused unless --yes\nor --mode allows them.")
    run.add_argument("prompt")
    run.add_argument("--cwd", default=".", help="project directory (default: current)")
    run.add_argument("--add-dir", action="append", default=[], metavar="DIR",
                     help="another directory that is part of the project (repeatable)")
    run.add_argument("--model", help="provider:model (overrides TALARIA_MODEL)")
    run.add_argument("--mode", help="permission mode: default, accept_edits, plan, auto, dont_ask, "
                                    "bypass (see the README's table)")
    run.add_argument("--yes", action="store_true", help="allow every tool call without asking")
    run.add_argument("--json", action="store_true", help="print events as JSON lines")
    run.add_argument("--max-turns", type=int, help="model calls allowed for this task")
    run.add_argument("--env", metavar="NAME[:ARG]",
                     help="execution environment: local, docker[:IMAGE], ssh:HOST, singularity:IMAGE, "
                          "modal, daytona, vercel, or a [environments.NAME] table")
    run.add_argument("--acp", action="store_true",
                     help="run through the protocol: `talaria acp` as a child, this process its editor")
    run.add_argument("--no-checkpoints", action="store_true",
                     help="take no checkpoint before the task changes files (talaria checkpoints)")

    demo = sub.add_parser("demo", help="fix a failing test in a bundled example project",
                          description="Copy a small example project with a failing test to a "
                          "temporary directory, let the agent\nfix it (a recorded model run, "
                          "no key needed; --live: the configured model), run\nits tests, and "
                          "remove the directory (--keep keeps it).",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("--live", action="store_true", help="use the configured model, not the recording")
    demo.add_argument("--model", help="provider:model for --live")
    demo.add_argument("--json", action="store_true", help="print events as JSON lines")
    demo.add_argument("--keep", action="store_true",
                      help="keep the demo's project directory (removed at the end otherwise)")

    sub.add_parser("acp", help="serve the Agent Client Protocol on stdio (editors launch this)",
                   description="Serve the Agent Client Protocol (v1) on stdin/stdout: what Zed, "
                   "JetBrains, Neovim,\nEmacs and VS Code launch (see editors/). stdout carries "
                   "only the protocol; warnings\ngo to stderr, the rest to "
                   "$TALARIA_HOME/logs/talaria.log.",
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    lsp = sub.add_parser("lsp", help="serve the Language Server Protocol on stdio (any LSP editor)",
                         description="Serve the Language Server Protocol on stdin/stdout: the same "
                         "agent for editors\nwithout an ACP client (Helix, Sublime Text, Neovim's "
                         "and Emacs's LSP clients).",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    lsp.add_argument("--stdio", action="store_true",
                     help="accepted because many clients pass it; stdio is the only transport")
    setup = sub.add_parser("setup", help="choose a provider and store its key",
                           description="Choose a provider and a model (config.toml) and store its "
                           "key in $TALARIA_HOME/credentials\n(mode 0600, never in config.toml). "
                           "At a terminal it asks; otherwise pass the flags and\npipe the key on "
                           "stdin.", formatter_class=argparse.RawDescriptionHelpFormatter)
    setup.add_argument("--provider", help="openai, anthropic, openrouter, ollama or custom")
    setup.add_argument("--model", help="model name at that provider, e.g. gpt-4.1")
    setup.add_argument("--base-url", help="OpenAI-compatible endpoint (custom, ollama, openrouter)")
    setup.add_argument("--api-key-env", help="variable that holds the key, e.g. OPENAI_API_KEY")
    setup.add_argument("--name", help="provider table name for a custom endpoint (default: custom)")
    env = sub.add_parser("env", help="execution environments: what works on this machine",
                         description="Execution environments (local, docker, ssh, singularity, "
                         "modal, daytona, vercel,\n[environments.NAME] tables): where tools act.",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    env_sub = env.add_subparsers(dest="env_command", required=True)
    env_check = env_sub.add_parser("check", help="one line per environment: engine, image, host, SDK",
                                   description="Check each environment (or the one named): its "
                                   "engine, image, host or SDK. Exit 1\nwhen the one named does "
                                   "not work.", formatter_class=argparse.RawDescriptionHelpFormatter)
    env_check.add_argument("name", nargs="?", help="one environment (NAME or NAME:ARG); default: all")
    env_check.add_argument("--cwd", default=".", help="project directory (default: current)")
    from talaria.acp_server.cli import batch as batch_cli
    from talaria.acp_server.cli import checkpoints as checkpoints_cli
    from talaria.acp_server.cli import config as config_cli
    from talaria.acp_server.cli import skills as skills_cli
    from talaria.acp_server.cli import trajectories as trajectories_cli
    config_cli.add_parser(sub)
    trajectories_cli.add_parser(sub)
    batch_cli.add_batch_parser(sub)
    skills_cli.add_parser(sub)
    checkpoints_cli.add_parser(sub)
    fill_descriptions(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from talaria.agent import codecache

    codecache.install()  # before any module that defines dataclasses or pydantic models
    # `talaria acp` / `lsp` are what editors launch: answer `initialize` without every parser.
    fast = argv in (["acp"], ["lsp"])
    if not fast and argv[:1] not in (["acp"], ["lsp"]):  # their stdout is the protocol's
        from talaria.acp_server.cli import pipes

        pipes.guard_stdout()
    command = argv[0] if argv else ""
    try:
        if fast:
            return _door(command)
        args = build_parser().parse_args(argv)  # --help writes to stdout too
        command = args.command
        if not getattr(args, "acp", False):  # `run --acp`: its child keeps the log
            from talaria.acp_server.cli.logfile import log_to_file

            log_to_file(args.command)
        return _dispatch(args)
    except KeyboardInterrupt:  # Ctrl-C: a clean stop, not a traceback
        print(f"\ntalaria {command}: interrupted", file=sys.stderr)
        return exits.INTERRUPTED
    except BaseException as exc:  # stdout closed early (`| head`): stop quietly
        from talaria.acp_server.cli import pipes

        if not pipes.closed(exc):
            raise
        pipes.silence()
        return exits.BROKEN_PIPE


def _door(command: str) -> int:
    """`talaria acp` or `talaria lsp`: serve the protocol on stdio."""
    if command == "acp":
        from talaria.agent import gcpause

        gcpause.pause()  # until start-up's imports are done (`AcpServer.parts`)
        from talaria.acp_server.server import main as acp_main

        if os.isatty(0):  # a person, not an editor: say what this waits for
            print(ACP_HINT, file=sys.stderr)
        return acp_main(gc_paused=True)
    from talaria.acp_server.lsp.main import main as lsp_main

    if os.isatty(0):
        print(LSP_HINT, file=sys.stderr)
    return lsp_main()


def _dispatch(args: argparse.Namespace) -> int:
    if args.command in ("acp", "lsp"):
        return _door(args.command)
    if args.command == "config":
        from talaria.acp_server.cli.config import run as config

        return config(args)
    if args.command == "run":
        from talaria.acp_server.cli.run import run_cli

        return run_cli(args)
    if args.command == "demo":
        from talaria.acp_server.cli.demo import demo_cli

        return demo_cli(args)
    if args.command == "setup":
        from talaria.acp_server.cli.setup import setup_cli

        return setup_cli(args)
    if args.command == "batch":
        from talaria.acp_server.cli.batch import run_batch_cli

        return run_batch_cli(args)
    if args.command == "skills":
        from talaria.acp_server.cli.skills import run as skills

        return skills(args)
    if args.command == "env":
        return _env_check(args)
    if args.command == "checkpoints":
        from talaria.acp_server.cli.checkpoints import run as checkpoints

        return checkpoints(args)
    if args.command == "trajectories":
        from talaria.acp_server.cli.trajectories import run as trajectories

        return trajectories(args)
    return exits.USAGE


def _env_check(args: argparse.Namespace) -> int:
    from pathlib import Path

    from talaria.agent.config import load_config
    from talaria.tools.environments.doctor import report

    try:
        config = load_config()
    except ValueError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return exits.USAGE
    lines, ok = report([args.name] if args.name else None, config.environments,
                       Path(args.cwd).resolve())
    print("\n".join(lines))
    return 0 if ok or not args.name else 1


if __name__ == "__main__":
    sys.exit(main())
