#!/usr/bin/env bash
# Packs what the device run needs into .device/bundle.tar.xz (paths absolute on the device).
set -euo pipefail
T=${CARGO_TARGET_DIR:-$HOME/.cache/gatehouse-target}
stage=$(mktemp -d)
mkdir -p $stage/opt/gh/bin $stage/opt/gh/lib
cp $T/release/gatehouse $stage/opt/gh/bin/
load=$(ls -t $T/release/deps/load-* | grep -v '\.d$' | head -1)
cp "$load" $stage/opt/gh/bin/load
cp /usr/bin/wrk /usr/bin/taskset $stage/opt/gh/bin/
mkdir -p $stage/usr/lib/postgresql $stage/usr/share/postgresql
cp -a /usr/lib/postgresql/15 $stage/usr/lib/postgresql/
cp -a /usr/share/postgresql/15 $stage/usr/share/postgresql/
rm -rf $stage/usr/share/postgresql/15/man $stage/usr/lib/postgresql/15/lib/bitcode $stage/usr/lib/postgresql/15/lib/llvmjit*
skip='^(libc|libm|libpthread|libdl|librt|libresolv|ld-linux-x86-64)\.so'
for exe in $stage/opt/gh/bin/* $stage/usr/lib/postgresql/15/bin/postgres $stage/usr/lib/postgresql/15/bin/initdb $stage/usr/lib/postgresql/15/bin/pg_ctl $stage/usr/lib/postgresql/15/lib/*.so; do
  ldd "$exe" 2>/dev/null | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  base=$(basename "$lib")
  if [[ "$base" =~ $skip ]]; then continue; fi
  cp -L "$lib" $stage/opt/gh/lib/
done
du -sh $stage/opt/gh/bin $stage/opt/gh/lib $stage/usr
XZ_OPT="-T2 -6" tar -C $stage -cJf .device/bundle.tar.xz opt usr
ls -la .device/bundle.tar.xz
rm -rf $stage
