#!/usr/bin/env python3
# Summarises a never-harm-cold file run with --max-steal: each mode's run divided by
# the vanilla run of its round (p99 for latency, Gbit/s for TCP, packets/s otherwise),
# leaving out a round where either run kept more than 5 % steal after its repeats;
# median, geometric mean with a 95 % interval (Student t on the logarithms), worst run;
# then falcon against both vanilla runs of its round (vanilla and vanilla@aa) together.
# usage: cold_steal.py FILE
import json, math, statistics as st, sys

BAR = 5
# Student t, two-sided 95 %, by degrees of freedom (from 30 on, about 2.04).
T95 = [12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13,
       2.12, 2.11, 2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05]


def value(r, wl):
    if wl == 'latency':
        return r['tool'][0]['p99_us']
    return r['gbps'] if wl == 'tcp' else r['pps']


d = json.load(open(sys.argv[1]))
res = {(x['mode'], x['workload']): x for x in d['results']}
def summary(wl, label, rat, left):
    lg = [math.log(x) for x in rat]
    n, mu = len(lg), st.mean(lg)
    half = T95[min(n - 2, len(T95) - 1)] * st.stdev(lg) / math.sqrt(n)
    worst = max(rat) if wl == 'latency' else min(rat)
    print(f"{wl:10s} {label:10s} n={n:2d} median {st.median(rat):.2f} geo {math.exp(mu):.2f} "
          f"({math.exp(mu - half):.2f}-{math.exp(mu + half):.2f}) worst {worst:.2f} left out rounds {left}")


def steady(*runs):
    return all(r is not None and r.get('steal_pct', 0) <= BAR for r in runs)


for wl in [w for w in ['udp', 'udp-stress', 'tcp', 'latency'] if ('vanilla', w) in res]:
    base = {r['round']: r for r in res[('vanilla', wl)]['runs']}
    aa = {r['round']: r for r in res[('vanilla@aa', wl)]['runs']}
    for m in ['vanilla@aa', 'falcon']:
        rat, left = [], []
        for r in res[(m, wl)]['runs']:
            b = base.get(r['round'])
            if b is None:
                continue
            if not steady(r, b):
                left.append(r['round'])
                continue
            rat.append(value(r, wl) / value(b, wl))
        summary(wl, m, rat, left)
    # falcon against both vanilla runs of its round (their geometric mean):
    # the two are the same mode, so neither alone is the truer baseline.
    rat, left = [], []
    for r in res[('falcon', wl)]['runs']:
        b, a = base.get(r['round']), aa.get(r['round'])
        if not steady(r, b, a):
            left.append(r['round'])
            continue
        rat.append(value(r, wl) / math.sqrt(value(b, wl) * value(a, wl)))
    summary(wl, 'falcon/both', rat, left)
