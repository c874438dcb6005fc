# The Helm 3 CLI the project renders and tests its charts with, built from Go modules
# (engines/build.sh helm). No process of the cluster. Sourced by parts/run.sh; do not run it.
# shellcheck shell=bash
#
# - build: the helm binary (last stdout line: its path).
# - ensure, restore, stop: nothing to do, and they say so; status prints nothing; recorded: never.

build() { bash "$ENGINES_DIR/build.sh" helm; }
ensure() { log "helm: nothing to start (a command-line tool: bash cluster/engines/build.sh helm prints its path)"; }
restore() { ensure; }
stop() { log "helm: nothing to stop"; }
status() { :; }
recorded() { return 1; }
