"""Self-improvement: the skills index and memory snapshot in the prompt (index.py, setup.py),
the background review after a turn (review.py), the curator (curator.py), skill slash
commands (commands.py). The skill and memory stores and their tools live in
`talaria.tools.skills` and `talaria.tools.memory`; this package decides when the agent uses them.

May import the agent's live path (session, loop, events, providers, config) and the tools;
never `talaria.agent.trajectories` or a front door.
"""
