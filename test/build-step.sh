#!/usr/bin/env bash
# build-step.sh NAME DIR COMMAND...: runs one slow build of the local stack in DIR and says
# when it starts and how long it took, so a first `make demo` or `make test` shows progress.
set -uo pipefail
name=$1 dir=$2
shift 2
echo "build: $name: starting ($(test/build-plan.sh --estimate "$name") on two cores)"
start=$SECONDS
if ! (cd "$dir" && "$@"); then
	echo "build: $name: FAILED after $((SECONDS - start)) s" >&2
	exit 1
fi
echo "build: $name: done in $((SECONDS - start)) s"
