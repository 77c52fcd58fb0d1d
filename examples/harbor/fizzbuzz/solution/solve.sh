#!/bin/sh
cat > /app/fizzbuzz.py <<'PY'
import sys

for i in range(1, int(sys.argv[1]) + 1):
    print(("Fizz" if i % 3 == 0 else "") + ("Buzz" if i % 5 == 0 else "") or i)
PY
