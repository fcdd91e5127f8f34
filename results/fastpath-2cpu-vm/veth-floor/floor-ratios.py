#!/usr/bin/env python3
# Paired ratios of floor.sh's output: each mode over another in the same
# round, geometric mean with a 95 % Student t interval on the logarithms,
# and the medians. Usage: floor-ratios.py FILE
import math, statistics as st, sys
from collections import defaultdict

T = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26, 11: 2.23, 12: 2.20}
METRICS = {'udp-pp': ['transactions/s', 'p50 us', 'p99 us'], 'tcp-pp': ['transactions/s', 'p50 us', 'p99 us'],
           'tcp': ['Gbit/s'], 'memcached': ['operations/s']}
# Besides each mode over vanilla: the one difference each variant makes.
EXTRA = [('fastpath', 'floor-vxlan-c'), ('fastpath', 'floor-vxlan'), ('floor-vxlan-c', 'floor-vxlan'),
         ('floor-vxlan', 'floor'), ('fastpath', 'fastpath-norps'), ('floor-rps', 'floor'), ('floor', 'host'),
         ('floor-1500', 'floor'), ('floor-1500', 'host')]

v = defaultdict(dict)  # (workload, metric) -> {(round, mode): value}
modes = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 4 or not f[0].isdigit() or f[2] not in METRICS:
        continue
    if f[1] not in modes:
        modes.append(f[1])
    for name, x in zip(METRICS[f[2]], f[3:]):
        v[(f[2], name)][(int(f[0]), f[1])] = float(x)

def ci(l):
    m = st.mean(l)
    h = T.get(len(l), 2.2) * st.stdev(l) / math.sqrt(len(l)) if len(l) > 1 else float('nan')
    return math.exp(m), math.exp(m - h), math.exp(m + h)

PAIRS = [(m, 'vanilla') for m in modes if m != 'vanilla'] + [p for p in EXTRA if set(p) <= set(modes)]
print('| workload | metric | ' + ' | '.join('%s median' % m for m in modes) + ' | ' +
      ' | '.join('%s / %s' % p for p in PAIRS) + ' |')
print('|---|---|' + '---:|' * (len(modes) + len(PAIRS)))
for (w, name), d in v.items():
    rounds = sorted({r for r, _ in d})
    med = ['%.4g' % st.median([d[(r, m)] for r in rounds if (r, m) in d]) for m in modes]
    rat = []
    for a, b in PAIRS:
        l = [math.log(d[(r, a)] / d[(r, b)]) for r in rounds if (r, a) in d and (r, b) in d]
        g, lo, hi = ci(l)
        rat.append('%.2f (%.2f–%.2f)' % (g, lo, hi))
    print('| %s | %s | %s | %s |' % (w, name, ' | '.join(med), ' | '.join(rat)))
