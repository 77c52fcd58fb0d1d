#!/usr/bin/env bash
# Build, unit-test and package Talaria's VS Code extension (talaria.vsix). Needs Node >= 20 and
# the npm registry. scripts/test calls this when npm exists.
set -euo pipefail
cd "$(dirname "$0")"
# --ignore-scripts: no dependency needs its install script to compile, test or package
# (@vscode/vsce-sign's only fetches the signing binary, used when publishing).
# node_modules as the lock file says: made again only when the lock changed since (npm ci
# deletes and reinstalls it every time: 10 s of scripts/test's second run).
if [ ! node_modules/.package-lock.json -nt package-lock.json ]; then
  npm ci --no-audit --no-fund --ignore-scripts
fi
npm test                     # tsc (strict) + node:test over out/test/*.test.js
npm run package </dev/null   # vscode:prepublish compiles again; stdin closed: never prompt
ls -l talaria.vsix
