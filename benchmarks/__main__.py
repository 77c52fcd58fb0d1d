"""Run the benchmarks: `python -m benchmarks [NAME ...]`; one JSON line per result on stdout."""

from __future__ import annotations

import json
import sys

from benchmarks import (
    acp,
    batch,
    batch_verify,
    compaction,
    compaction_hermes,
    compare,
    core,
    environments,
    execute_code,
    export,
    instructions,
    learning,
    learning_loop,
    load_memory,
    lsp,
    prompt,
    recall,
    search,
    shell,
    stall,
    subagents,
    web_mcp,
)

SUITES = {
    **acp.BENCHMARKS,
    **batch.BENCHMARKS,
    **batch_verify.BENCHMARKS,
    **compaction.BENCHMARKS,
    **compaction_hermes.BENCHMARKS,
    **compare.BENCHMARKS,
    **core.BENCHMARKS,
    **environments.BENCHMARKS,
    **execute_code.BENCHMARKS,
    **export.BENCHMARKS,
    **instructions.BENCHMARKS,
    **learning.BENCHMARKS,
    **learning_loop.BENCHMARKS,
    **load_memory.BENCHMARKS,
    **lsp.BENCHMARKS,
    **prompt.BENCHMARKS,
    **recall.BENCHMARKS,
    **search.BENCHMARKS,
    **shell.BENCHMARKS,
    **stall.BENCHMARKS,
    **subagents.BENCHMARKS,
    **web_mcp.BENCHMARKS,
}


def main(argv: list[str]) -> int:
    names = argv or list(SUITES)
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(SUITES)}", file=sys.stderr)
        return 2
    for name in names:
        for result in SUITES[name]():
            print(json.dumps({"benchmark": name, **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
