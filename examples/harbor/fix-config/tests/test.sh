#!/bin/sh
# Solved: port 8080, host and workers untouched.
mkdir -p /logs/verifier
check() {
    grep -qx 'port = 8080' /app/app.ini || { echo "port is not 8080"; return 1; }
    grep -qx 'host = 0.0.0.0' /app/app.ini || { echo "host changed"; return 1; }
    grep -qx 'workers = 4' /app/app.ini || { echo "workers changed"; return 1; }
    echo "app.ini is right"
}
if check; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
