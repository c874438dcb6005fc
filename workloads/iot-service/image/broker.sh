#!/bin/sh
# The broker image's entry point: NATS Server with JetStream, the IoT service's broker. Each
# component connects on 4222 as its own user with its own password (from iot-credentials), and
# may do only what it needs (NATS authorization permissions; nothing else is allowed):
#   gateway     IOT_BROKER_GATEWAY_PASSWORD: publish telemetry (`telemetry.>`), read the telemetry
#               stream's info (its readiness), and receive core's device-change notices
#               (`devices.changed`) and the replies to its own requests (`_INBOX_gateway.>`: the
#               stream's acknowledgements), and publish devices' connection events
#               (`events.connection.>`). For commands: make, read and acknowledge on the
#               consumers of stream COMMANDS (a device's own, made by the gateway serving it), and
#               read and write command states (stream COMMAND_STATES). It cannot read telemetry
#               or events, touch a stream, put a command, or announce device changes.
#   processing  IOT_BROKER_PROCESSING_PASSWORD: pull from and acknowledge on the durable consumer
#               `processing` of stream TELEMETRY and the durable consumer `connections` of stream
#               EVENTS (their info, their next messages, their acks), publish
#               dead-letter notices (`deadletters.>`) and stored telemetry's events
#               (`events.telemetry.>`), and receive its own replies
#               (`_INBOX_processing.>`: the messages it pulls). It cannot publish telemetry or
#               make, change or delete a stream or consumer.
#   core        IOT_BROKER_CORE_PASSWORD: make and update the streams TELEMETRY, DEAD_LETTERS and
#               EVENTS and make the consumer `processing` (info, create, update — never delete),
#               make, read from and delete consumers of EVENTS alone (the applications' event
#               streams), publish device-change notices, and receive its own replies
#               (`_INBOX_core.>`); make and update the streams COMMANDS and COMMAND_STATES, put
#               commands, read, write and follow command states. It cannot publish telemetry or
#               events, read TELEMETRY, or take commands.
# Each user's replies come to its own inbox prefix, so none can listen to another's (the
# messages processing pulls are replies). The monitoring endpoint on 8222 answers /healthz (the
# readiness probe) and /jsz (the operator's ingestion reading). The JetStream file store lives in
# /var/lib/iot/jetstream (the broker's volume), so the streams and what they hold survive a
# restart of the process or the pod. With IOT_BROKER_REPLICAS=3 the three pods of StatefulSet
# `broker` form one cluster (routes on 6222 to broker-0..2 of the headless Service `broker` in
# POD_NAMESPACE, authenticated as user `route` with IOT_BROKER_ROUTE_PASSWORD, which no client
# can use) and JetStream replicates by Raft. The configuration is written at every start to
# IOT_BROKER_CONFIG_DIR (default /tmp/nats; the root file system is read-only), readable by this
# user alone, so changed passwords take effect on the next start. One broker: SIGTERM reaches
# nats-server itself (exec), which stops accepting, flushes the store and exits. Three: SIGTERM
# (the pod's deletion, as in a roll) puts nats-server in lame duck mode (SIGUSR2): it hands the
# leadership of its streams and consumers to the other two while its routes are still up and
# stops accepting clients; 2 s later SIGINT stops it, closing its clients (they reconnect to the
# other brokers). Plain SIGTERM closes every client first and hands over its leaderships only as
# it stops. The server is named after its pod (POD_NAME), which its JetStream peers know it by.
set -eu
replicas=${IOT_BROKER_REPLICAS:-1}
name=${POD_NAME:-broker-0}
passwords="IOT_BROKER_GATEWAY_PASSWORD IOT_BROKER_PROCESSING_PASSWORD IOT_BROKER_CORE_PASSWORD"
if [ "$replicas" -gt 1 ]; then passwords="$passwords IOT_BROKER_ROUTE_PASSWORD"; fi
for variable in $passwords; do
  eval "value=\${$variable:-}"
  if [ -z "$value" ]; then echo "$variable (from Secret iot-credentials) is not set" >&2; exit 1; fi
  case "$value" in *[!A-Za-z0-9_-]*) echo "$variable must be URL-safe base64 (A-Z a-z 0-9 _ -)" >&2; exit 1 ;; esac
done
umask 077
dir=${IOT_BROKER_CONFIG_DIR:-/tmp/nats}
mkdir -p "$dir"
cat >"$dir/nats.conf" <<CONF
server_name: "$name"
listen: "0.0.0.0:4222"
http: "0.0.0.0:8222"
max_payload: 1MB
authorization {
  GATEWAY = {
    publish: { allow: [
      "telemetry.>", "\$JS.API.STREAM.INFO.TELEMETRY", "events.connection.>",
      "\$JS.API.CONSUMER.CREATE.COMMANDS.>", "\$JS.API.CONSUMER.INFO.COMMANDS.*", "\$JS.API.CONSUMER.MSG.NEXT.COMMANDS.*", "\$JS.ACK.COMMANDS.>",
      "commandstates.>", "\$JS.API.STREAM.MSG.GET.COMMAND_STATES"
    ] }
    subscribe: { allow: ["devices.changed", "_INBOX_gateway.>"] }
  }
  PROCESSING = {
    publish: { allow: [
      "\$JS.API.CONSUMER.INFO.TELEMETRY.processing",
      "\$JS.API.CONSUMER.MSG.NEXT.TELEMETRY.processing",
      "\$JS.ACK.TELEMETRY.processing.>",
      "\$JS.API.CONSUMER.INFO.EVENTS.connections",
      "\$JS.API.CONSUMER.MSG.NEXT.EVENTS.connections",
      "\$JS.ACK.EVENTS.connections.>",
      "deadletters.>",
      "events.telemetry.>"
    ] }
    subscribe: { allow: ["_INBOX_processing.>"] }
  }
  CORE = {
    publish: { allow: [
      "\$JS.API.STREAM.INFO.TELEMETRY", "\$JS.API.STREAM.CREATE.TELEMETRY", "\$JS.API.STREAM.UPDATE.TELEMETRY",
      "\$JS.API.STREAM.INFO.DEAD_LETTERS", "\$JS.API.STREAM.CREATE.DEAD_LETTERS", "\$JS.API.STREAM.UPDATE.DEAD_LETTERS",
      "\$JS.API.CONSUMER.INFO.TELEMETRY.processing", "\$JS.API.CONSUMER.CREATE.TELEMETRY.processing",
      "\$JS.API.STREAM.INFO.EVENTS", "\$JS.API.STREAM.CREATE.EVENTS", "\$JS.API.STREAM.UPDATE.EVENTS",
      "\$JS.API.CONSUMER.CREATE.EVENTS", "\$JS.API.CONSUMER.CREATE.EVENTS.>", "\$JS.API.CONSUMER.INFO.EVENTS.>", "\$JS.API.CONSUMER.DELETE.EVENTS.>", "\$JS.API.CONSUMER.MSG.NEXT.EVENTS.>",
      "devices.changed",
      "\$JS.API.STREAM.INFO.COMMANDS", "\$JS.API.STREAM.CREATE.COMMANDS", "\$JS.API.STREAM.UPDATE.COMMANDS",
      "\$JS.API.STREAM.INFO.COMMAND_STATES", "\$JS.API.STREAM.CREATE.COMMAND_STATES", "\$JS.API.STREAM.UPDATE.COMMAND_STATES",
      "commands.>", "commandstates.>", "\$JS.API.STREAM.MSG.GET.COMMAND_STATES",
      "\$JS.API.CONSUMER.CREATE.COMMAND_STATES", "\$JS.API.CONSUMER.CREATE.COMMAND_STATES.>", "\$JS.API.CONSUMER.MSG.NEXT.COMMAND_STATES.*", "\$JS.API.CONSUMER.DELETE.COMMAND_STATES.*"
    ] }
    subscribe: { allow: ["_INBOX_core.>"] }
  }
  users: [
    { user: "gateway", password: "$IOT_BROKER_GATEWAY_PASSWORD", permissions: \$GATEWAY }
    { user: "processing", password: "$IOT_BROKER_PROCESSING_PASSWORD", permissions: \$PROCESSING }
    { user: "core", password: "$IOT_BROKER_CORE_PASSWORD", permissions: \$CORE }
  ]
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
    \"nats://route:$IOT_BROKER_ROUTE_PASSWORD@broker-$i.broker.$POD_NAMESPACE.svc:6222\""
    i=$((i + 1))
  done
  cat >>"$dir/nats.conf" <<CONF
cluster {
  name: "iot"
  listen: "0.0.0.0:6222"
  authorization { user: "route", password: "$IOT_BROKER_ROUTE_PASSWORD" }
  routes: [$routes
  ]
}
lame_duck_grace_period: "1s"
lame_duck_duration: "30s"
CONF
fi
echo "{\"level\":\"info\",\"component\":\"broker\",\"msg\":\"starting\",\"version\":\"${IOT_SERVICE_VERSION:-}\",\"replicas\":$replicas}"
if [ "$replicas" -eq 1 ]; then exec nats-server --config "$dir/nats.conf"; fi
nats-server --config "$dir/nats.conf" &
server=$!
trap 'kill -USR2 "$server" 2>/dev/null && sleep 2 && kill -INT "$server" 2>/dev/null || true' TERM
trap 'kill -INT "$server" 2>/dev/null || true' INT
while :; do
  if wait "$server"; then status=0; else status=$?; fi
  kill -0 "$server" 2>/dev/null || break
done
exit "$status"
