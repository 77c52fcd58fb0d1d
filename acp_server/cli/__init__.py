"""The `talaria` command: one module per subcommand (main.py parses and dispatches, importing
each subcommand's module only when it runs, so `talaria acp` starts fast).

May import everything below it: the ACP door, the headless client, the agent, the tools.
"""
