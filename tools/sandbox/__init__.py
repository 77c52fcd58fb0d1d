"""Confining child processes: the tiers (tiers.py: bubblewrap, Landlock + seccomp, rlimits;
`prepare`), the launcher that runs inside (launch.py, early.py, landlock.py, seccomp.py:
standard library only, run with -I -S), pids cgroups (cgroup.py), cached bytecode
(bytecode.py).

May import `talaria.tools.errors`; the launcher's modules import only the standard library
and each other.
"""
