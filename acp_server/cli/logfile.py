"""`$TALARIA_HOME/logs/talaria.log` for the commands that run the agent or long jobs in this
process (`talaria run`, `demo`, `trajectories`), as `talaria acp` and `lsp` keep it: INFO and
up in the file, warnings and errors on stderr (issue 28: plain `talaria run` wrote none, though
the README says the rest is there). Not `batch`: its forked workers would inherit the handler
and share one file across processes; each keeps its own log under the run's logs/."""

from __future__ import annotations

LOGGED = ("run", "demo", "trajectories")


def log_to_file(command: str) -> None:
    """Start the log for `command` when it is one of LOGGED; a bad config.toml is left to the
    command itself to report."""
    if command not in LOGGED:
        return
    from talaria.acp_server.logs import setup_logging
    from talaria.agent.config import load_config

    try:
        config = load_config()
    except ValueError:
        return
    explicit = config.sources.get("log_level") not in (None, "default")
    try:
        setup_logging(config.home, config.log_level if explicit else None)
    except ValueError:  # an unknown TALARIA_LOG_LEVEL: the file at its default levels
        setup_logging(config.home)
