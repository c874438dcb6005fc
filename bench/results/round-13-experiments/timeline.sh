#!/bin/bash
# Every 10 s: the API server's request counts for the objects of a burst, and kwok's CPU seconds,
# one line each into $1 (default timeline.tsv) until killed; run beside a bench run.
K=~/.cache/iot-operator/k8s-v1.33.13-etcd-v3.5.21-kwok-v0.7.0/bin/kubectl
KC=~/.kwok/clusters/iot-bench/kubeconfig.yaml
out=${1:-timeline.tsv}
echo -e "time\tpods_post\tpods_binding\tpods_patch_status\tpods_put_status\tdeploy_apply\tsts_apply\tns_create\tiot_status_patch\tconfigmap_apply\tkwok_cpu" > $out
while true; do
  m=$($K --kubeconfig $KC get --raw /metrics 2>/dev/null | grep '^apiserver_request_total{')
  c() { echo "$m" | grep "resource=\"$1\"" | grep "verb=\"$2\"" | grep "subresource=\"$3\"" | awk '{s+=$2} END {print s+0}'; }
  pid=$(pgrep -f "iot-bench/bin/kwok-controller" | head -1)
  kc=$([[ -n "$pid" ]] && awk '{print ($14+$15)/100}' /proc/$pid/stat || echo 0)
  echo -e "$(date +%T)\t$(c pods POST '')\t$(c pods POST binding)\t$(c pods PATCH status)\t$(c pods PUT status)\t$(c deployments APPLY '')\t$(c statefulsets APPLY '')\t$(c namespaces POST '')\t$(c iotservices PATCH status)\t$(c configmaps APPLY '')\t$kc" >> $out
  sleep 10
done
