#!/usr/bin/env bash
# module-dir.sh DIR MODULE: prints the directory of MODULE (at the version DIR's go.mod
# requires) in the Go module cache, downloading it first. `go list -m -f '{{.Dir}}'` prints
# nothing for a module that is not in the cache yet, which only an empty cache shows.
set -euo pipefail
cd "$1"
dir=$(${GO:-go} mod download -json "$2" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
if [ -z "$dir" ] || [ ! -d "$dir" ]; then
	echo "module-dir.sh: $2 (required by $1/go.mod) could not be downloaded" >&2
	exit 1
fi
echo "$dir"
