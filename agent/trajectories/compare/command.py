"""Compare runs end to end: read them, pair them, write the page and the JSON beside it.

    html, data_file, data = compare([Path("data/a"), Path("data/b")], None)

`output` is the page (OUT.html); the JSON goes beside it as OUT.json. By default both are
`compare-A-vs-B.html` / `.json` in the current directory. Both are written only once the
comparison is complete (each through a temp file and a rename): bad input (a missing run, runs
without shared tasks, an unreadable line) raises CompareError and writes nothing.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from talaria.agent.trajectories.compare.build import compare_runs
from talaria.agent.trajectories.compare.outcomes import CompareError, RunOutcomes, read_run
from talaria.agent.trajectories.compare.page import render_compare
from talaria.agent.trajectories.compare.paired import LEVEL, RESAMPLES, SEED

MAX_RESAMPLES = 1_000_000
MAX_RUNS = 12


def labels_for(sources: list[Path]) -> list[str]:
    """Each run's name (its directory's; a trajectories.jsonl file is named by its
    directory), made unique with ` (2)`, ` (3)` ... when two runs share one."""
    out: list[str] = []
    for source in sources:
        path = source.resolve()
        if path.is_file():
            name = path.parent.name if path.name == "trajectories.jsonl" else path.stem
        else:
            name = path.name
        label, n = name or str(source), 1
        while label in out:
            n += 1
            label = f"{name} ({n})"
        out.append(label)
    return out


def compare(sources: list[Path], output: Path | None, *, resamples: int = RESAMPLES,
            seed: int = SEED, level: float = LEVEL) -> tuple[Path, Path, dict[str, Any]]:
    if not 2 <= len(sources) <= MAX_RUNS:
        raise CompareError(f"compare takes 2 to {MAX_RUNS} runs, not {len(sources)}")
    if not 1 <= resamples <= MAX_RESAMPLES:
        raise CompareError(f"--resamples must be between 1 and {MAX_RESAMPLES:,}")
    if not 0 < level < 1:
        raise CompareError(f"--level must be between 0 and 1 (e.g. 0.95), not {level}")
    runs: list[RunOutcomes] = [read_run(s, label) for s, label in zip(sources, labels_for(sources), strict=True)]
    for run in runs:
        if not run.tasks:
            raise CompareError(f"{run.path}: no checked attempt ({run.lines} line(s), none with a "
                               "verdict): compare needs tasks with a check")
    data = compare_runs(runs, resamples=resamples, seed=seed, level=level)
    html = output or Path(_default_name([r.label for r in runs]))
    target = html.with_suffix(".json")
    if target == html:
        raise CompareError(f"-o {html}: name the page OUT.html (the JSON goes to OUT.json)")
    _write_both({html: render_compare(data), target: json.dumps(data, ensure_ascii=False, indent=1) + "\n"})
    return html, target, data


def _default_name(labels: list[str]) -> str:
    safe = [re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "run" for label in labels]
    return f"compare-{'-vs-'.join(safe)}"[:150] + ".html"


def _write_both(files: dict[Path, str]) -> None:
    """Every file through a temp file first; the renames come last, together."""
    temps = []
    try:
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            temps.append((tmp, path))
    except OSError as exc:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
        raise CompareError(f"cannot write {exc.filename or 'the output'}: {exc.strerror or exc}") from exc
    for tmp, path in temps:
        os.replace(tmp, path)
