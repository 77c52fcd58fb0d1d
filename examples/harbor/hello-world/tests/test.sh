#!/bin/sh
# The reward: 1 when /app/hello.txt says exactly "Hello, world!", else 0.
mkdir -p /logs/verifier
if [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, world!" ]; then
    echo "hello.txt is right"
    echo 1 > /logs/verifier/reward.txt
else
    echo "hello.txt is missing or wrong: $(head -c 200 /app/hello.txt 2>&1)"
    echo 0 > /logs/verifier/reward.txt
fi
