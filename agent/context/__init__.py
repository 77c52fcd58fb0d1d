"""The context window: token counting (tokens.py, offline cl100k), compaction (compaction.py,
with stage1.py's deterministic trimming and summarizer.py's summaries).

May import the rest of the agent's live path (session, events, providers) and the tools;
never `talaria.agent.trajectories` or a front door.
"""
