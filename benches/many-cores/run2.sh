#!/usr/bin/env bash
# Second device run: logins with limits pinned to the server's CPUs; CPU use by group during the
# PostgreSQL read/refresh rows and both fan-outs.
. benches/many-cores/setup.sh
L="$L --duration 4"
for cpus in 0 0-1 0-3 0-7 0-11; do
  timeout 60 $L --backend sqlite --only logins --server-cpus $cpus --out $R/login-$cpus.md >/dev/null 2>$R/login-$cpus.err
  echo "=== logins $cpus rc=$? at $(el) s"; grep -E '^\| Password' $R/login-$cpus.md | cut -d'|' -f2-5 | cut -c1-160; save
done
timeout 90 $L --backend sqlite --only steady,fanout --server-cpus 0-11 --out $R/sq-fan.md 2>&1 >/dev/null | stamp > $R/sq-fan.ev
echo "=== sqlite fan-out 0-11 at $(el) s"; grep -E '^\| Webhook' $R/sq-fan.md | cut -d'|' -f2-3 | cut -c1-130
python3 benches/many-cores/cpu.py $R/cpu.raw $R/sq-fan.ev "server=0-11;wrk=12-15" 4; save
taskset -c 8-11 timeout 90 $L --backend postgres --only reads --duration 1 --server-cpus 0-7 --client-cpus 12-15 >/dev/null 2>$R/pgw.err
echo "=== pg warm-up rc=$? at $(el) s"
timeout 90 $L --backend postgres --only reads,refreshes --server-cpus 0-7 --client-cpus 12-15 --read-connections 256 --out $R/pg-rr.md 2>&1 >/dev/null | stamp > $R/pg-rr.ev
echo "=== pg reads+refreshes 0-7 at $(el) s"; grep -E '^\| (Authenticated|Refreshes)' $R/pg-rr.md | cut -d'|' -f2-5 | cut -c1-170
python3 benches/many-cores/cpu.py $R/cpu.raw $R/pg-rr.ev "server=0-7;pg=8-11;wrk=12-15" 4; save
timeout 100 $L --backend postgres --only steady,fanout --server-cpus 0-7 --client-cpus 12-15 --out $R/pg-fan.md 2>&1 >/dev/null | stamp > $R/pg-fan.ev
echo "=== pg fan-out 0-7 at $(el) s"; grep -E '^\| Webhook' $R/pg-fan.md | cut -d'|' -f2-3 | cut -c1-130
python3 benches/many-cores/cpu.py $R/cpu.raw $R/pg-fan.ev "server=0-7;pg=8-11;rest=12-15" 4; save
cp $R/cpu.raw $OUT/ 2>/dev/null; cat $R/*.ev > $OUT/events.log
echo "done at $(el) s"
