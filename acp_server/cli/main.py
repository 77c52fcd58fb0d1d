"""The `talaria` command. Imports stay inside each subcommand so `talaria acp` starts fast."""

from __future__ import annotations

import argparse
import os
import sys

from talaria.acp_server.cli import exits

ACP_HINT = ("talaria acp: speaking the Agent Client Protocol on stdin/stdout; editors launch this. "
            "Try `talaria run \"...\"` or see `talaria --help`.")


class VersionAction(argparse.Action):
    """`--version`, read from the package metadata only when asked for."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from talaria.acp_server.version import version

        print(f"talaria {version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="talaria", description="A coding agent for your editor.",
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
    run.add_argument("--model", help="provider:model (overrides TALARIA_MODEL)")
    run.add_argument("--mode", help="permission mode: default, accept_edits, plan, auto, dont_ask, "
                                    "bypass (see the README's table)")
    run.add_argument("--yes", action="store_true", help="allow every tool call without asking")
    run.add_argument("--json", action="store_true", help="print events as JSON lines")
    run.add_argument("--max-turns", type=int, help="model calls allowed for this task")
    run.add_argument("--acp", action="store_true",
                     help="run through the protocol: `talaria acp` as a child, this process its editor")

    demo = sub.add_parser("demo", help="fix a failing test in a bundled example project")
    demo.add_argument("--live", action="store_true", help="use the configured model, not the recording")
    demo.add_argument("--model", help="provider:model for --live")
    demo.add_argument("--json", action="store_true", help="print events as JSON lines")

    sub.add_parser("config", help="print the effective configuration and its sources")
    sub.add_parser("acp", help="serve the Agent Client Protocol on stdio (editors launch this)")
    setup = sub.add_parser("setup", help="choose a provider and store its key")
    setup.add_argument("--provider", help="openai, anthropic, openrouter, ollama or custom")
    setup.add_argument("--model", help="model name at that provider, e.g. gpt-4.1")
    setup.add_argument("--base-url", help="OpenAI-compatible endpoint (custom, ollama, openrouter)")
    setup.add_argument("--api-key-env", help="variable that holds the key, e.g. OPENAI_API_KEY")
    setup.add_argument("--name", help="provider table name for a custom endpoint (default: custom)")
    from talaria.acp_server.cli import batch as batch_cli
    from talaria.acp_server.cli import trajectories as trajectories_cli
    trajectories_cli.add_parser(sub)
    batch_cli.add_batch_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # `talaria acp` is what editors launch: answer `initialize` without building every parser.
    args = argparse.Namespace(command="acp") if argv == ["acp"] else build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except KeyboardInterrupt:  # Ctrl-C: a clean stop, not a traceback
        print(f"\ntalaria {args.command}: interrupted", file=sys.stderr)
        return exits.INTERRUPTED


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "acp":
        from talaria.acp_server.server import main as acp_main

        if os.isatty(0):  # a person, not an editor: say what this waits for
            print(ACP_HINT, file=sys.stderr)
        return acp_main()
    if args.command == "config":
        return _config()
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
    if args.command == "trajectories":
        from talaria.acp_server.cli.trajectories import run as trajectories

        return trajectories(args)
    return exits.USAGE


def _config() -> int:
    from talaria.agent.config import describe, load_config

    try:
        config = load_config()
    except ValueError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return exits.USAGE
    rows = describe(config)
    width = max(len(name) for name, _, _ in rows)
    for name, value, source in rows:
        print(f"{name:<{width}}  {value or '-'}  ({source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
