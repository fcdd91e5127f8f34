#!/usr/bin/env python3
# Summarises a never-harm-cold file run with --max-steal: each mode's run divided by
# the vanilla run of its round (p99 for latency, Gbit/s for TCP, packets/s otherwise),
# leaving out a round where either run kept more than 5 % steal after its repeats;
# median, geometric mean with a 95 % interval (Student t on the logarithms), worst run;
# then falcon against both vanilla runs of its round (vanilla and vanilla@aa) together.
# "beyond" counts the runs past the single-run bar (throughput under 0.85 x, p99 over
# 1/0.85 x its round's vanilla), and p is a one-sided Fisher exact test that falcon has more of
# them than the A/A control. Several files are pooled, their rounds kept apart.
# usage: cold_steal.py FILE...
import json, math, statistics as st, sys

BAR = 5
# Student t, two-sided 95 %, by degrees of freedom (from 30 on, about 2.04).
T95 = [12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13,
       2.12, 2.11, 2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05]


def value(r, wl):
    if wl == 'latency':
        return r['tool'][0]['p99_us']
    return r['gbps'] if wl == 'tcp' else r['pps']


SINGLE = 0.85
res = {}
for i, name in enumerate(sys.argv[1:]):
    for x in json.load(open(name))['results']:
        r = res.setdefault((x['mode'], x['workload']), {'runs': []})
        r['runs'] += [dict(run, round=(i, run['round'])) for run in x['runs']]
beyond = {}


def past(wl, x):
    return x > 1 / SINGLE if wl == 'latency' else x < SINGLE


def fisher_more(a, n1, b, n2):
    # P(falcon's count >= a) given a + b runs beyond among n1 + n2, none different.
    k, tot = a + b, math.comb(n1 + n2, a + b)
    return sum(math.comb(n1, i) * math.comb(n2, k - i) for i in range(a, min(k, n1) + 1)) / tot


def summary(wl, label, rat, left):
    lg = [math.log(x) for x in rat]
    n, mu = len(lg), st.mean(lg)
    half = T95[min(n - 2, len(T95) - 1)] * st.stdev(lg) / math.sqrt(n)
    worst = max(rat) if wl == 'latency' else min(rat)
    out = sum(past(wl, x) for x in rat)
    beyond[label] = (out, n)
    extra = ''
    if label == 'falcon' and 'vanilla@aa' in beyond:
        extra = f" p(more than A/A) {fisher_more(out, n, *beyond['vanilla@aa']):.2f}"
    print(f"{wl:10s} {label:11s} n={n:2d} median {st.median(rat):.2f} geo {math.exp(mu):.2f} "
          f"({math.exp(mu - half):.2f}-{math.exp(mu + half):.2f}) worst {worst:.2f} beyond {out}{extra} "
          f"left out {len(left)}")


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
