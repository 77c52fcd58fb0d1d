"""The Workspace seam on this machine: files on disk and local subprocesses
(workspace.py: LocalWorkspace, run_command), and search with ripgrep or in Python (search.py).

May import the rest of `talaria.tools` (sandbox, procs, errors).
"""
