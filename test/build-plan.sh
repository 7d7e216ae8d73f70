#!/usr/bin/env bash
# build-plan.sh BINARY...: before the local stack's slow builds, says which binaries are not
# built yet and roughly how long they take on a two-core machine, or that all are cached.
# build-plan.sh --estimate NAME prints the estimate of one.
set -euo pipefail

# Seconds each took from a clean clone on two cores with the Go module cache filled; an
# empty module cache adds the downloads.
seconds() {
	case $1 in
	kube-apiserver) echo 360 ;;
	kube-controller-manager) echo 100 ;;
	kube-scheduler) echo 10 ;;
	kubectl) echo 30 ;;
	etcd) echo 40 ;;
	etcdctl | etcdutl) echo 5 ;;
	minio) echo 140 ;;
	fake-gcs-server) echo 45 ;;
	source-controller) echo 260 ;;
	kustomize-controller) echo 185 ;;
	cert-manager) echo 240 ;;
	kubelet) echo 185 ;;
	containerd) echo 120 ;;
	containerd-shim-runc-v2 | ctr | bridge) echo 15 ;;
	*) echo 30 ;;
	esac
}
say() {
	if [ "$1" -ge 90 ]; then echo "about $((($1 + 30) / 60)) min"; else echo "under a minute"; fi
}
if [ "${1:-}" = --estimate ]; then
	say "$(seconds "${2%% *}")"
	exit 0
fi

missing=() total=0
for b in "$@"; do
	[ -e "$b" ] && continue
	missing+=("$b")
	total=$((total + $(seconds "$(basename "$b")")))
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "build: the local stack's binaries are all built (bin/, by version): nothing to build"
	exit 0
fi
echo "build: first run: ${#missing[@]} binaries of the local stack are built from their Go modules into bin/ (once, kept by version):"
for b in "${missing[@]}"; do
	echo "build:   $(basename "$(dirname "$b")")/$(basename "$b"): $(say "$(seconds "$(basename "$b")")")"
done
echo "build: $(say "$total") in all on a two-core machine, plus the module downloads on an empty Go cache"
