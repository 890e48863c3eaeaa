#!/usr/bin/env bash
# The device run: how reads, refreshes and logins grow with cores (SQLite, then PostgreSQL),
# and the fan-out rows on many cores. Tables go to $OUT/tables.md as each run ends.
. benches/many-cores/setup.sh
run() {
  local name=$1 budget=$2; shift 2
  echo "=== $name at $(el) s: $*"
  timeout $budget $L "$@" --out $R/$name.md > $R/$name.out 2> $R/$name.err
  echo "rc=$? at $(el) s"
  grep -E '^\| (Authenticated|Refreshes|Password|Webhook)' $R/$name.md | cut -d'|' -f2-5 | cut -c1-170
  grep -E 'ERROR|WARN|panick' $R/$name.err | head -3
  for f in $R/*.md; do echo "## $f"; cat $f; done > $OUT/tables.md
  tail -c 20000 $R/$name.err > $OUT/last.err
}
[ "${ONLY_PG:-}" ] || {
for cpus in 0 0-1 0-3 0-7 0-11; do
  run sqlite-$cpus 90 --backend sqlite --only reads,logins,refreshes --duration ${D:-4} --server-cpus $cpus --read-connections 256
done
run sqlite-fanout-0-11 120 --backend sqlite --only steady,fanout --duration ${D:-4} --server-cpus 0-11
}
# PostgreSQL: the cluster (started by a warm-up run under taskset 8-11, figures not kept) keeps
# CPUs 8-11; wrk gets 12-15; the server 0-1, 0-3, 0-7.
taskset -c 8-11 timeout 90 $L --backend postgres --only reads --duration 1 --server-cpus 0-7 --client-cpus 12-15 > $R/pg-warmup.out 2> $R/pg-warmup.err
echo "=== pg warm-up rc=$? at $(el) s"; grep -E 'gatehouse-testkit|panick' $R/pg-warmup.err | head -5
ps -eo pid,psr,comm | grep -m3 postgres; taskset -pc $(pgrep -o postgres) 2>/dev/null
for cpus in 0-1 0-3 0-7; do
  timeout 90 $L --backend postgres --only reads,refreshes --duration ${D:-4} --server-cpus $cpus --client-cpus 12-15 --read-connections 256 --out $R/pg-$cpus.md > $R/pg-$cpus.out 2> $R/pg-$cpus.err
  echo "=== pg-$cpus rc=$? at $(el) s"
  grep -E '^\| (Authenticated|Refreshes)' $R/pg-$cpus.md | cut -d'|' -f2-5 | cut -c1-170
  grep -E 'ERROR|WARN|panick|gatehouse-testkit' $R/pg-$cpus.err | head -3
  for f in $R/*.md; do echo "## $f"; cat $f; done > $OUT/tables.md
done
timeout 150 $L --backend postgres --only steady,fanout --duration ${D:-4} --server-cpus 0-7 --client-cpus 12-15 --out $R/pg-fanout-0-7.md > $R/pg-fanout.out 2> $R/pg-fanout.err
echo "=== pg-fanout rc=$? at $(el) s"
grep -E '^\| Webhook' $R/pg-fanout-0-7.md | cut -d'|' -f2-5 | cut -c1-170
for f in $R/*.md; do echo "## $f"; cat $f; done > $OUT/tables.md
echo "done at $(el) s"
