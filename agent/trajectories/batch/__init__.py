"""Batch runs: many tasks, isolated workspaces, checkpointed results (`talaria batch`).

    tasks.py       the tasks file and stable task ids
    runner.py      run_batch(BatchOptions) -> BatchResult: scheduling, resume, retry-failed
    executors.py   where tasks run: LocalExecutor (worker processes), RayExecutor
    worker.py      one task: workspace, session, store, tools -> its record; `serve`
    warm.py        what the local executor's forkserver imports once for all workers
    sdk.py         the models' SDKs, loaded as set-up so model_s holds model calls only
    records.py     the shape of a trajectories.jsonl line
    checkpoint.py  the run directory: atomic appends, checkpoint, crash recovery
    stats.py       statistics.json;  progress.py  the progress line on stderr

May import the agent's live path (runtime, loop, store) and the tools.
"""
