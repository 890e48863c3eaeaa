#!/usr/bin/env bash
# Third device run: the fan-out rows against the per-endpoint limit (4, 8, 16), both backends.
. benches/many-cores/setup.sh
L="$L --duration 3"
for n in 4 8 16; do
  timeout 60 $L --backend sqlite --only fanout --server-cpus 0-11 --env GATEHOUSE_WEBHOOK_ENDPOINT_CONCURRENCY=$n --out $R/sq-$n.md 2>&1 >/dev/null | stamp > $R/sq-$n.ev
  echo "=== sqlite per-endpoint $n at $(el) s"; grep -E '^\| Webhook' $R/sq-$n.md | cut -d'|' -f3 | cut -c1-60; grep -E 'took|twice|more than once|received' $R/sq-$n.md | cut -c1-120
  python3 benches/many-cores/cpu.py $R/cpu.raw $R/sq-$n.ev "server=0-11;rest=12-15" 3; save
done
taskset -c 8-11 timeout 90 $L --backend postgres --only reads --duration 1 --server-cpus 0-7 --client-cpus 12-15 >/dev/null 2>$R/pgw.err
echo "=== pg warm-up rc=$? at $(el) s"
for n in 4 8 16; do
  timeout 60 $L --backend postgres --only fanout --server-cpus 0-7 --client-cpus 12-15 --env GATEHOUSE_WEBHOOK_ENDPOINT_CONCURRENCY=$n --out $R/pg-$n.md 2>&1 >/dev/null | stamp > $R/pg-$n.ev
  echo "=== pg per-endpoint $n at $(el) s"; grep -E '^\| Webhook' $R/pg-$n.md | cut -d'|' -f3 | cut -c1-60; grep -E 'took|more than once|received' $R/pg-$n.md | cut -c1-120
  python3 benches/many-cores/cpu.py $R/cpu.raw $R/pg-$n.ev "server=0-7;pg=8-11;rest=12-15" 3; save
done
cat $R/*.ev > $OUT/events.log
echo "done at $(el) s"
