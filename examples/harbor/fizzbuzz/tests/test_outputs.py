"""Runs /app/fizzbuzz.py for a few N; the reward is the share of runs that are right."""

import json
import subprocess
import sys


def expected(n):
    out = []
    for i in range(1, n + 1):
        word = ("Fizz" if i % 3 == 0 else "") + ("Buzz" if i % 5 == 0 else "")
        out.append(word or str(i))
    return out


passed = 0
CASES = (1, 3, 5, 15, 31)
for n in CASES:
    try:
        run = subprocess.run([sys.executable, "/app/fizzbuzz.py", str(n)], capture_output=True,
                             text=True, timeout=10)
        ok = run.stdout.split() == expected(n)
    except (OSError, subprocess.TimeoutExpired) as exc:
        ok = False
        print(f"N={n}: {exc}")
    print(f"N={n}: {'ok' if ok else 'wrong'}")
    passed += ok
with open("/logs/verifier/reward.json", "w") as f:
    json.dump({"reward": passed / len(CASES), "passed": passed, "total": len(CASES)}, f)
