"""Compress ShareGPT trajectories to a token budget (`talaria trajectories compress`).

    api.py       compress_file: the pipeline over a file, metrics
    worker.py    options, token counters, the plan for one line (runs in worker processes)
    plan.py      which span to summarize, the summary request, fallbacks
    run.py       the concurrent pipeline (planning in processes, summaries on one loop)

May import the agent's live path (summarizer, providers, config) and the tools.
"""
