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
    core,
    environments,
    execute_code,
    learning,
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

SUITES = {**core.BENCHMARKS, **compaction.BENCHMARKS, **compaction_hermes.BENCHMARKS,
          **acp.BENCHMARKS, **execute_code.BENCHMARKS,
          **batch.BENCHMARKS, **batch_verify.BENCHMARKS, **stall.BENCHMARKS, **recall.BENCHMARKS, **learning.BENCHMARKS,
          **environments.BENCHMARKS, **lsp.BENCHMARKS, **subagents.BENCHMARKS,
          **web_mcp.BENCHMARKS, **shell.BENCHMARKS, **search.BENCHMARKS,
          **prompt.BENCHMARKS,
          **load_memory.BENCHMARKS}


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
