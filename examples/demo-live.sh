#!/usr/bin/env bash
# Live demo: starts the local Kubernetes stack, installs the operator with its kustomize
# manifests, creates examples/basic (3 members), then scales it to 5 and back to 3 while
# `kubectl get etcdcluster` shows the plan moving step by step.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
KUBECTL="bin/kubectl --kubeconfig $PWD/.stack/kubeconfig"
NS=etcdplan-demo

"$MAKE" deploy
$KUBECTL create namespace "$NS" --dry-run=client -o yaml | $KUBECTL apply -f - >/dev/null
$KUBECTL label namespace "$NS" pod-security.kubernetes.io/enforce=restricted --overwrite >/dev/null

# watch prints `kubectl get etcdcluster` whenever it changes, until the cluster is Ready
# with no plan left.
watch() {
  local last="" key
  # sed, not head: head would exit early and the SIGPIPE would fail the script (pipefail).
  $KUBECTL -n "$NS" get etcdcluster demo -o wide 2>/dev/null | sed -n 1p
  for _ in $(seq 1 600); do
    key=$($KUBECTL -n "$NS" get etcdcluster demo -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.memberSummary} {.status.plan.summary}' 2>/dev/null || true)
    if [ "$key" != "$last" ]; then
      $KUBECTL -n "$NS" get etcdcluster demo -o wide --no-headers 2>/dev/null || true
      last=$key
    fi
    case "$key" in "True "*" ") ready=${key#True }; ready=${ready% }
      [ "${ready%/*}" = "${ready#*/}" ] && return 0 ;;
    esac
    sleep 0.3
  done
  echo "the cluster did not become Ready; see: bin/kubectl-etcd status demo -n $NS" >&2
  return 1
}

echo "=== create examples/basic: 3 members"
$KUBECTL -n "$NS" apply -f examples/basic/etcdcluster.yaml
watch
echo
echo "=== scale to 5"
$KUBECTL -n "$NS" scale etcdcluster demo --replicas=5
watch
echo
echo "=== scale back to 3"
$KUBECTL -n "$NS" scale etcdcluster demo --replicas=3
watch
echo
echo "=== kubectl etcd status demo"
bin/kubectl-etcd status demo -n "$NS" --kubeconfig .stack/kubeconfig
echo
echo "=== a pull request to 5 members (examples/scale-out), planned against the live cluster"
bin/kubectl-etcd plan -k examples/scale-out -n "$NS" --kubeconfig .stack/kubeconfig
cat <<TXT

The cluster runs in namespace $NS of the local stack. Try:
  export KUBECONFIG=$PWD/.stack/kubeconfig PATH=$PWD/bin:\$PATH
  kubectl etcd status demo -n $NS            # members, leader, plan, history
  kubectl -n $NS get etcdcluster demo -o yaml  # status.plan and status.history
  kubectl -n etcdplan-system logs deploy/etcdplan   # the operator's log (-f to follow)
  kubectl -n $NS logs demo-0 -c etcd         # a member's log (--previous after a restart)
  kubectl -n $NS exec demo-0 -c etcd -- etcdctl endpoint status -w table
  kubectl -n $NS delete pod demo-1           # the same member comes back
  kubectl -n $NS patch etcdcluster demo --type merge -p '{"spec":{"updateStrategy":{"approval":"Manual"}}}'
  kubectl -n $NS apply -k examples/scale-out   # the plan above now waits for approval
  kubectl etcd status demo -n $NS            # review it, then:
  kubectl etcd approve demo -n $NS --plan <the plan's ID>
  make stack-down                            # stop everything
TXT
