#!/bin/sh
# The broker image's entry point: Mosquitto with MQTT on 1883 for user `iot` only, whose password
# is IOT_BROKER_PASSWORD (from iot-credentials). The password file and configuration are written
# to /tmp at every start (the root file system is read-only), so a changed password takes effect
# on the next start; sessions and queued messages persist in /var/lib/iot (the broker's volume)
# and survive a restart. No AMQP: the reference broker speaks MQTT only. SIGTERM reaches mosquitto
# itself (exec), which saves its persistence file and exits.
set -eu
: "${IOT_BROKER_PASSWORD:?IOT_BROKER_PASSWORD (from Secret iot-credentials) is not set}"
umask 077
dir=/tmp/mosquitto
mkdir -p "$dir"
printf 'iot:%s\n' "$IOT_BROKER_PASSWORD" >"$dir/passwd"
mosquitto_passwd -U "$dir/passwd"
cat >"$dir/mosquitto.conf" <<CONF
listener 1883 0.0.0.0
allow_anonymous false
password_file $dir/passwd
persistence true
persistence_location /var/lib/iot/
autosave_interval 30
max_queued_messages 1000000
log_dest stdout
log_type error
log_type warning
log_type notice
log_timestamp_format %Y-%m-%dT%H:%M:%S
CONF
echo "{\"level\":\"info\",\"component\":\"broker\",\"msg\":\"starting\",\"version\":\"${IOT_SERVICE_VERSION:-}\"}"
exec mosquitto -c "$dir/mosquitto.conf"
