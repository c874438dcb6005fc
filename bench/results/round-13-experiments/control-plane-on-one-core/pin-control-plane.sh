#!/bin/bash
# Every second: every thread of every process of the iot-bench cluster on CPU 0 only.
while true; do
  for pid in $(pgrep -f "/root/.kwok/clusters/iot-bench/"); do
    aff=$(taskset -p $pid 2>/dev/null | awk '{print $NF}')
    [[ "$aff" == "1" ]] || taskset -a -p -c 0 $pid >/dev/null 2>&1 && true
  done
  sleep 1
done
