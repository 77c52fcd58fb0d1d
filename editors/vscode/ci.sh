#!/usr/bin/env bash
# Build, unit-test and package Talaria's VS Code extension (talaria.vsix). Needs Node >= 20 and
# the npm registry. scripts/test calls this when npm exists.
set -euo pipefail
cd "$(dirname "$0")"
# --ignore-scripts: no dependency needs its install script to compile, test or package
# (@vscode/vsce-sign's only fetches the signing binary, used when publishing).
npm ci --no-audit --no-fund --ignore-scripts
npm test                     # tsc (strict) + node:test over out/test/*.test.js
npm run package </dev/null   # vscode:prepublish compiles again; stdin closed: never prompt
ls -l talaria.vsix
