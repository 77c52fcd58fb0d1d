#!/bin/sh
# Makes DIR/example__calc: a git repository of calc/ with one commit, the same commit hash on
# every machine (fixed author, committer and dates), which is the instances' base_commit.
#   sh examples/swebench/make_repos.sh /tmp/repos
#   talaria batch examples/swebench/instances.jsonl --repos /tmp/repos --run-name swe
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo="${1:?usage: make_repos.sh DIR}/example__calc"
rm -rf "$repo"
mkdir -p "$repo"
cp -R "$here/calc/." "$repo/"
cd "$repo"
export GIT_AUTHOR_NAME=Talaria GIT_AUTHOR_EMAIL=talaria@example.invalid
export GIT_COMMITTER_NAME=Talaria GIT_COMMITTER_EMAIL=talaria@example.invalid
export GIT_AUTHOR_DATE="2025-01-01T00:00:00+0000" GIT_COMMITTER_DATE="2025-01-01T00:00:00+0000"
git init -q -b main .
git add -A
git -c core.fileMode=true -c commit.gpgsign=false commit -q -m "calc: add, mul, divide"
git rev-parse HEAD
