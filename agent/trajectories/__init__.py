"""Trajectories after the fact: the model (model.py) and loading (load.py), exports
(export/), compression to a token budget (compress/), batch generation (batch/), HTML views
(view.py, report.py, charts.py).

The offline wing: may import the agent's live path and the tools; nothing on the live path
imports it. export/, compress/ and the views are independent of each other.
"""
