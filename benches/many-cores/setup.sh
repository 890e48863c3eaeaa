# Sourced by the run scripts, on the lent machine, from the repository root: unpacks the bundle
# (README.md), makes the `postgres` user PostgreSQL's throwaway cluster runs as, and starts a
# sampler of /proc/stat (every 0.25 s, into $R/cpu.raw) for cpu.py.
set -u
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
tar -C / -xJf .device/bundle.tar.xz || exit 1
[ -f .device/load ] && cp .device/load /opt/gh/bin/load
export LD_LIBRARY_PATH=/opt/gh/lib PATH=/opt/gh/bin:/usr/lib/postgresql/15/bin:$PATH
if ! grep -q '^postgres:' /etc/passwd; then
  echo 'postgres:x:990:990:PostgreSQL:/var/lib/postgresql:/bin/sh' >> /etc/passwd
  echo 'postgres:x:990:' >> /etc/group
fi
mkdir -p /var/lib/postgresql && chown 990:990 /var/lib/postgresql
echo "cpus: $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
R=/tmp/results; mkdir -p $R
( while :; do echo "$(date +%s.%N | cut -c1-14) $(grep '^cpu[0-9]' /proc/stat | awk '{printf "%d %d ", $2+$3+$4+$7+$8, $5+$6}')"; sleep 0.25; done > $R/cpu.raw ) &
# The bench, on the carried server binary (whose libraries the server's cleared environment
# must be told again).
L="load --binary /opt/gh/bin/gatehouse --env LD_LIBRARY_PATH=/opt/gh/lib"
stamp() { while IFS= read -r line; do echo "$(date +%s.%N | cut -c1-14) $line"; done; }
save() { for f in $R/*.md; do echo "## $f"; cat $f; done > $OUT/tables.md; }
