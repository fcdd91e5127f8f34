#!/usr/bin/env python3
"""Ratios of web-load-ab.sh's output: each part (a line starting '## ')
pairs every mode run with the vanilla run before it; geometric mean of the
pairs' ratios, 95 % interval by Student t on the logarithms."""
import math
import statistics as st
import sys

T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23, 11: 2.20}


def us(s):
    return float(s[:-2]) * (1000 if s.endswith('ms') else 1)


def parse(line):
    f = line.split()
    r = dict(mode=f[0], p50=us(f[1]), p90=us(f[2]), p99=us(f[3]), rps=float(f[4]))
    i = f.index('idle_pct')
    r['idle'] = f'{f[i + 1]}/{f[i + 2]}'
    r['nginx_switches'] = int(f[f.index('nginx_switches') + 1])
    r['ksoftirqd0'] = int(f[f.index('ksoftirqd0') + 1])
    return r


def ratio(xs):
    logs = [math.log(x) for x in xs]
    m, h = st.mean(logs), T95[len(logs) - 1] * st.stdev(logs) / math.sqrt(len(logs))
    return f'{math.exp(m):.2f} ({math.exp(m - h):.2f}-{math.exp(m + h):.2f})'


def report(part, runs):
    van = [r for r in runs if r['mode'] == 'vanilla']
    other = [r for r in runs if r['mode'] != 'vanilla']
    print(f'## {part}: {len(other)} pairs')
    for k in ('p50', 'p90', 'p99', 'rps'):
        print(f'  {k:4} medians vanilla {st.median(r[k] for r in van):.0f} {other[0]["mode"]} '
              f'{st.median(r[k] for r in other):.0f}  ratio {ratio([a[k] / b[k] for a, b in zip(other, van)])}')
    for k in ('idle', 'nginx_switches', 'ksoftirqd0'):
        print(f'  {k}: vanilla {" ".join(str(r[k]) for r in van)} | {other[0]["mode"]} {" ".join(str(r[k]) for r in other)}')


def main():
    part, runs = None, []
    for line in open(sys.argv[1]):
        if line.startswith('## '):
            if runs:
                report(part, runs)
            part, runs = line[3:].strip(), []
        elif line.split() and line.split()[0] != '#' and 'idle_pct' in line:
            runs.append(parse(line))
    if runs:
        report(part, runs)


main()
