"""Talaria's agent layer: the loop, sessions, providers, compression, trajectories.

Knows nothing about JSON-RPC; front doors in `acp_server/` consume its events.
"""
