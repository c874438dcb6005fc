# Prometheus and promtool, built from the module engines/prometheus pins. No process of the
# cluster: the monitoring tests deploy Prometheus on the real node themselves (deployPrometheus,
# cluster/src/prometheus.ts) and run promtool directly. Sourced by parts/run.sh; do not run it.
# shellcheck shell=bash
#
# - build: promtool, then prometheus (last stdout line: the prometheus binary).
# - ensure, restore, stop: nothing to do, and they say so; status prints nothing; recorded: never.

build() {
  bash "$ENGINES_DIR/build.sh" promtool >/dev/null
  bash "$ENGINES_DIR/build.sh" prometheus
}
ensure() { log "prometheus: nothing to start (tests deploy it: deployPrometheus in cluster/src/prometheus.ts)"; }
restore() { ensure; }
stop() { log "prometheus: nothing to stop (its pods go with the tests' namespaces)"; }
status() { :; }
recorded() { return 1; }
