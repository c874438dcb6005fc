#!/usr/bin/env bash
# Bundles an operator's TypeScript sources into one plain-JavaScript ES module under bench/.build/,
# so that it can be measured without the tsx loader (tsx registers module hooks that run on a
# separate loader thread and roughly double resident memory).
#
#   bash bench/bundle-operator.sh [iot|memcached] [own|all]
#     own (default): our sources are bundled; npm packages stay external, loaded from node_modules
#     all:           @kubernetes/client-node is bundled too, so esbuild drops the parts of it
#                    (generated API classes and models) that the runtime never uses
#   -> prints the command to pass as --operator-cmd
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
which=${1:-iot}
mode=${2:-own}
case "$which" in
  iot) entry=operators/iot/src/main.ts ;;
  memcached) entry=operators/memcached/src/main.ts ;;
  *) echo "usage: $0 [iot|memcached] [own|all]" >&2; exit 2 ;;
esac
externals=()
for pkg in @sinclair/typebox commander pino prom-client yaml; do externals+=("--external:$pkg"); done
case "$mode" in
  own) externals+=("--external:@kubernetes/client-node") ;;
  all) ;;
  *) echo "usage: $0 [iot|memcached] [own|all]" >&2; exit 2 ;;
esac
out="bench/.build/$which-operator-$mode.mjs"
mkdir -p bench/.build
# Bundled CommonJS dependencies call require(); give the ES module one.
node_modules/.bin/esbuild "$entry" --bundle --platform=node --format=esm --target=node20 "${externals[@]}" \
  "--banner:js=import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" \
  --outfile="$out" --log-level=warning >&2
echo "node $out --log-level warn"
