"""Per-phase CPU use by CPU group, from /proc/stat samples (cpu.raw) and timestamped bench
stderr (events): prints, for each phase window, the busy cores of each group."""
import sys
raw, events, groups_arg, dur = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
groups = []
for g in groups_arg.split(';'):
    name, rng = g.split('=')
    a, b = map(int, rng.split('-'))
    groups.append((name, list(range(a, b + 1))))
samples = []
for line in open(raw):
    parts = line.split()
    if len(parts) < 3:
        continue
    t = float(parts[0]); vals = list(map(int, parts[1:]))
    busy = vals[0::2]; idle = vals[1::2]
    samples.append((t, busy, idle))
def window(t0, t1):
    inside = [s for s in samples if t0 <= s[0] <= t1]
    if len(inside) < 2:
        return None
    a, b = inside[0], inside[-1]
    out = []
    for name, cpus in groups:
        db = sum(b[1][c] - a[1][c] for c in cpus); di = sum(b[2][c] - a[2][c] for c in cpus)
        out.append(f"{name} {len(cpus) * db / max(db + di, 1):.1f}/{len(cpus)}")
    return ", ".join(out)
ev = []
for line in open(events):
    t, _, text = line.partition(' ')
    try:
        ev.append((float(t), text.strip()))
    except ValueError:
        pass
for i, (t, text) in enumerate(ev):
    if ' wrk -t' in text:
        w = window(t + 0.5, t + dur - 0.3)
        print(f"  {text.split('http')[-1][-40:]:40s} busy cores: {w}")
    if '[fan-out] 1' in text or 'steady fan-out' in text:
        end = next((t2 for t2, x in ev[i + 1:] if 'baseline' in x or 'fan-out' in x or 'wrk' in x), t + 8)
        if 'steady' in text:
            end = t + dur
        print(f"  {text[:40]:40s} busy cores: {window(t + 0.2, end)} over {end - t:.1f} s")
