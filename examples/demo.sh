#!/usr/bin/env bash
# Offline demo: builds kubectl-etcd and prints the plans of the example manifests against
# each example observed state, as a pull request would see them. Nothing is applied.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
BIN=${BIN:-$PWD/bin}

"$GO" build -o "$BIN/kubectl-etcd" ./cmd/kubectl-etcd

describe() {
  case "$1" in
    empty) echo "nothing exists yet" ;;
    three-healthy) echo "three healthy members on 3.6.16" ;;
    three-dead-member) echo "three members, demo-2 lost its data" ;;
    three-on-3.5) echo "three healthy members on 3.5.35, demo-1 leads" ;;
    *) echo "$1" ;;
  esac
}

plan() {
  local manifests=$1 state=$2
  echo "=== $manifests against $(describe "$state")"
  echo "\$ kubectl etcd plan $manifests --observed examples/observed/$state.json --detailed-exitcode"
  local code=0
  # shellcheck disable=SC2086 # $manifests is "-f FILE" or "-k DIR"
  "$BIN/kubectl-etcd" plan $manifests --observed "examples/observed/$state.json" --detailed-exitcode || code=$?
  echo "(exit $code: $(case $code in 0) echo no changes ;; 2) echo changes ;; *) echo error ;; esac))"
  echo
  [ "$code" -ne 1 ] # an error or a blocked plan fails the demo
}

for state in empty three-healthy three-dead-member three-on-3.5; do
  plan "-f examples/basic/etcdcluster.yaml" "$state"
done
plan "-k examples/scale-out" three-healthy

echo "=== the same scale-out as a pull-request comment"
"$BIN/kubectl-etcd" plan -k examples/scale-out --observed examples/observed/three-healthy.json -o markdown
