#!/usr/bin/env bash
# Issue 32's targets, and the benchmarks before them, re-run one after another on a quiet machine:
# this checkout's dist/ against BASE (another commit's build, for before/after in the same run) and
# each target's peer. Logs go to OUT/<step>.log; each bench writes its own bench/results/*.json.
#
#   npm run build && bash bench/issue-32-targets.sh /tmp/base [OUT] [step ...]
#
# BASE: a worktree of the earlier commit, built (`git worktree add --detach /tmp/base <commit> &&
# ln -s "$PWD/node_modules" /tmp/base/ && (cd /tmp/base && npm run build)`). Steps (default: all):
# floor floor-redis grpc half-load lone cluster keys hot gateway middleware redis-store memory-store rules
set -uo pipefail
cd "$(dirname "$0")/.."
BASE=${1:?usage: bench/issue-32-targets.sh BASE [OUT] [step ...]}
OUT=${2:-/tmp/issue-32-targets}
shift $(( $# >= 2 ? 2 : 1 ))
STEPS=${*:-floor floor-redis grpc half-load lone cluster keys hot gateway middleware redis-store memory-store rules}
mkdir -p "$OUT"
MW=node/bare/admitted,node/tollgate-memory/admitted,node/noop/admitted,node/noop-next/admitted,fastify/bare/admitted,fastify/tollgate-memory/admitted,fastify/noop/admitted,hono/bare/admitted,hono/tollgate-memory/admitted,hono/noop/admitted

run() {
  local step=$1; shift
  echo "== $step: $* (load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%H:%M:%S))" | tee -a "$OUT/steps.log"
  local started=$SECONDS
  "$@" >"$OUT/$step.log" 2>&1
  echo "   exit $? after $((SECONDS - started)) s (load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$OUT/steps.log"
}

for step in $STEPS; do
  case $step in
    floor) run floor node bench/service-floor.js --base "$BASE" --batches 10,100 --repeats 3 --duration 5 ;;
    floor-redis) run floor-redis node bench/service-floor.js --redis --only redis --batches 10,100 --repeats 3 --duration 5 ;;
    grpc) run grpc node bench/service-grpc.js --repeats 3 --duration 5 --base "$BASE" --only h2-floor,tollgate-mem-h2,base-mem-h2 ;;
    half-load) run half-load node bench/service-half-load.js --before "$BASE" --repeats 3 --duration 8 ;;
    lone) run lone node bench/redis-lone.js --rounds 5 --duration 1500 --warmup 700 --before "$BASE/dist" ;;
    cluster) run cluster node bench/redis-cluster-spread.js --before "$BASE" --rounds 3 --duration 2000 --warmup 700 --in-flight 64,256 ;;
    keys) run keys node bench/memory-store-ab.js --scenario many-keys --rounds 5 "token-bucket-sync@$BASE/dist" token-bucket-sync@dist rlflex ;;
    hot) run hot node bench/memory-store-ab.js --scenario hot-admitted --rounds 5 "token-bucket@$BASE/dist" token-bucket@dist rlflex ;;
    gateway) run gateway node bench/gateway.js --repeats 3 --duration 5 --base "$BASE" ;;
    middleware) run middleware node bench/http-middleware.js --rounds 5 --duration 4 --warmup 1 --extra --only "$MW" --out issue-32-middleware ;;
    redis-store) run redis-store node bench/redis-store.js ;;
    memory-store) run memory-store node --expose-gc bench/memory-store.js ;;
    rules) run rules node bench/rules-lookup.js ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
