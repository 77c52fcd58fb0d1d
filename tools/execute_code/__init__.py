"""`execute_code`: the tool (tool.py), session kernels (kernel.py, pool.py), the child that
runs in the sandbox (child.py: standard library only, Python 3.8+), its settings and
environment (env.py), output capture (output.py), the `hermes_tools` stubs (stubs.py).

May import the rest of `talaria.tools` (the sandbox, procs, the registry).
"""
