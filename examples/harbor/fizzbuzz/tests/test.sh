#!/bin/sh
# Partial credit: the share of checks passed goes to /logs/verifier/reward.json.
mkdir -p /logs/verifier
python3 /tests/test_outputs.py
