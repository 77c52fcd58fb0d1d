"""Execution environments: where commands run and where the project's files live (local, a
Docker/Podman container, an SSH host, Singularity/Apptainer, Modal, Daytona, Vercel Sandbox),
behind one seam (`base.Environment`, `base.EnvWorkspace`).

May import the standard library, `talaria.tools` (the Workspace seam, errors, the local
workspace and sandbox) and, lazily, a vendor's SDK when that environment is used; never
`talaria.agent` or a front door. `helper.py`, `walk.py` and `files.py` (in `tools/local/`) run
on the other side with the standard library only.
"""
