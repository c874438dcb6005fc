#!/usr/bin/env bash
# Runs one command of one part of the local cluster (cluster/cli runs them in order for up, down
# and status; tests call a part's own commands):
#
#   bash cluster/parts/run.sh <part> build|ensure|restore|stop|status|recorded|<the part's own command> [args]
#
# Guarantees: every parts/<part>/part.sh defines the same six commands, each documented in its
# header (a command that has nothing to do for a part says so there and when run):
#   build     builds or reuses what the part runs (cluster/engines/build.sh); last stdout line as the engine's
#   ensure    makes the part run as configured, building it if needed; idempotent, fast when it runs
#   restore   brings back what this cluster has after the cluster or the machine restarted; never
#             starts a part the cluster does not have
#   stop      stops the part's processes (its data stays unless the part says otherwise)
#   status    prints its lines; exit 0 healthy (or not part of this cluster), 1 unhealthy
#   recorded  exit 0 when this cluster has the part
# A part's own commands (e.g. registry's rotate-password) are its functions of that name (dashes
# for underscores). The exit code is the command's; progress goes to stderr.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

part=${1:-} command=${2:-}
[[ -n "$part" && -f "$PARTS_DIR/$part/part.sh" ]] || die "unknown part '$part' (known: $(cd "$PARTS_DIR" && echo */ | tr -d /))"
# shellcheck source=/dev/null
source "$PARTS_DIR/$part/part.sh"
fn=${command//-/_}
[[ -n "$fn" ]] && declare -F "$fn" >/dev/null || die "part '$part' has no command '$command'"
shift 2
"$fn" "$@"
