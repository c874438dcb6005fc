#!/usr/bin/env bash
# What the seed's Argo workflow (wf-blog-group) does, with kubectl only: enable blog-1, wait until
# it is deployed, then the same for blog-2. Each step is one `kubectl patch` (an Argo `resource`
# step with action: patch, mergeStrategy: merge does exactly that) and one wait on
# status.actual_state (the step's successCondition).
#
#   bash examples/argo/enable-in-order.sh [namespace]
#   env: KUBECTL (default: kubectl on PATH), TIMEOUT (per chart, default 300s)
set -euo pipefail
KUBECTL=${KUBECTL:-kubectl}
NS_ARGS=()
[[ -n "${1:-}" ]] && NS_ARGS=(-n "$1")
TIMEOUT=${TIMEOUT:-300s}

for chart in blog-1 blog-2; do
  echo "enable-$chart"
  "$KUBECTL" "${NS_ARGS[@]}" patch armadachart "$chart" --type merge -p '{"spec":{"target_state":"deployed"}}'
  echo "$chart-ready"
  "$KUBECTL" "${NS_ARGS[@]}" wait armadachart "$chart" --for=jsonpath='{.status.actual_state}'=deployed --timeout="$TIMEOUT"
done
