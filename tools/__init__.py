"""The tools and what they act on: the registry (imports nothing of ours), one module per
tool, the Workspace seam (workspace.py) and its local implementation (local/), execute_code
(execute_code/), the sandbox tiers (sandbox/), child-process records (procs.py), secret
patterns (redact.py), the error tree (errors.py).

The lowest layer: imports nothing from `talaria.agent` or `talaria.acp_server`.
"""
