"""Exit statuses of the `talaria` command, in one place (`talaria --help` prints `HELP`)."""

from __future__ import annotations

DONE = 0
NOT_DONE = 1
USAGE = 2
MODEL = 3
NO_TERMINAL = 4
INTERRUPTED = 130
BROKEN_PIPE = 141
"""128 + SIGPIPE: what a shell reports for a command a closed pipe ended (`| head`)."""

HELP = f"""\
exit status:
  {DONE:<4} done: the turn ended normally (batch: every task completed)
  {NOT_DONE:<4} not done: the turn stopped early (max turns, refusal, cancelled), the agent
       stopped answering, the demo's tests still fail, or a batch task failed
  {USAGE:<4} bad usage or configuration: a flag, config.toml, --cwd
  {MODEL:<4} no model configured, a key refused, or the model endpoint unreachable
  {NO_TERMINAL:<4} a tool call needed permission and there was no terminal to ask on
       (talaria run: allow with --yes, or choose a --mode that does not ask)
  {INTERRUPTED:<4} interrupted (Ctrl-C)
  {BROKEN_PIPE:<4} stdout was closed early (a pipe into head): stopped quietly
"""
