"""Batch runs: many tasks, isolated workspaces, checked, checkpointed results (`talaria batch`).

    datasets.py    what TASKS is: task lines (tasks.py), Harbor directories (harbor.py, with
                   images.py), SWE-bench instances (swebench.py, testlog.py)
    runner.py      run_batch(BatchOptions) -> BatchResult: scheduling, attempts, resume,
                   retry-failed; jobs.py turns (task, attempt) pairs into jobs
    executors.py   where tasks run: LocalExecutor (worker processes); ray_executor.py
                   RayExecutor (Ray actors, one per worker slot)
    worker.py      one attempt: workspace, session, store, tools -> its record; `serve`
    attempt.py     the agent (or a control agent: controls.py), then the task's check
    stage.py       files put where the task ran; verifier.py the check's verdict; checks.py
                   the check keys
    warm.py        what the local executor's forkserver imports once for all workers
    sdk.py         the models' SDKs, loaded as set-up so model_s holds model calls only
    records.py     the shape of a trajectories.jsonl line
    checkpoint.py  the run directory: atomic appends, checkpoint, crash recovery
    stats.py       statistics.json (verdicts.py: pass@k, cost, breakdowns; sequences.py:
                   tool-call n-grams before success, repeated errors); progress.py the
                   progress line on stderr
    mix.py         --toolset-mix: each task's arm, drawn from the seed and its id

May import the agent's live path (runtime, loop, store) and the tools.
"""
