#!/bin/bash
# Every second: every thread of every process of the iot-bench cluster on CPU 0 only (the cluster
# is made again between phases, so new processes are pinned as they appear). The bench ran beside
# it on the other core: taskset -c 1 npm run bench -- burst --n 1000 --timeout 2400
while true; do
  for pid in $(pgrep -f "/root/.kwok/clusters/iot-bench/"); do
    [[ "$(taskset -p "$pid" 2>/dev/null | awk '{print $NF}')" == "1" ]] || taskset -a -p -c 0 "$pid" >/dev/null 2>&1
  done
  sleep 1
done
