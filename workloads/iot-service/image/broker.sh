#!/bin/sh
# The broker image's entry point: NATS Server with JetStream, the IoT service's broker. Clients
# (gateway, processing) connect on 4222 as user `iot` with IOT_BROKER_PASSWORD (from
# iot-credentials); the monitoring endpoint on 8222 answers /healthz (the readiness probe). The
# JetStream file store lives in /var/lib/iot/jetstream (the broker's volume), so the stream and
# what it holds survive a restart of the process or the pod. With IOT_BROKER_REPLICAS=3 the three
# pods of StatefulSet `broker` form one cluster (routes on 6222 to broker-0..2 of the headless
# Service `broker` in POD_NAMESPACE, authenticated with the same password) and JetStream replicates
# by Raft. The configuration is written to /tmp at every start (the root file system is
# read-only), so a changed password takes effect on the next start. SIGTERM reaches nats-server
# itself (exec), which stops accepting, flushes the store and exits; the server is named after
# its pod (POD_NAME), which its JetStream peers know it by.
set -eu
: "${IOT_BROKER_PASSWORD:?IOT_BROKER_PASSWORD (from Secret iot-credentials) is not set}"
case "$IOT_BROKER_PASSWORD" in *[!A-Za-z0-9_-]*) echo 'IOT_BROKER_PASSWORD must be URL-safe base64 (A-Z a-z 0-9 _ -)' >&2; exit 1 ;; esac
replicas=${IOT_BROKER_REPLICAS:-1}
name=${POD_NAME:-broker-0}
umask 077
dir=/tmp/nats
mkdir -p "$dir"
cat >"$dir/nats.conf" <<CONF
server_name: "$name"
listen: "0.0.0.0:4222"
http: "0.0.0.0:8222"
max_payload: 1MB
authorization {
  users: [ { user: "iot", password: "$IOT_BROKER_PASSWORD" } ]
}
jetstream {
  store_dir: "/var/lib/iot/jetstream"
}
CONF
if [ "$replicas" -gt 1 ]; then
  : "${POD_NAMESPACE:?POD_NAMESPACE (the pod's namespace) is not set}"
  routes=""
  i=0
  while [ "$i" -lt "$replicas" ]; do
    routes="$routes
    \"nats://iot:$IOT_BROKER_PASSWORD@broker-$i.broker.$POD_NAMESPACE.svc:6222\""
    i=$((i + 1))
  done
  cat >>"$dir/nats.conf" <<CONF
cluster {
  name: "iot"
  listen: "0.0.0.0:6222"
  authorization { user: "iot", password: "$IOT_BROKER_PASSWORD" }
  routes: [$routes
  ]
}
CONF
fi
echo "{\"level\":\"info\",\"component\":\"broker\",\"msg\":\"starting\",\"version\":\"${IOT_SERVICE_VERSION:-}\",\"replicas\":$replicas}"
exec nats-server --config "$dir/nats.conf"
