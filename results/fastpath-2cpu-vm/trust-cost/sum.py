# Rounds of run.sh: the fast path now against the fast path at 89ca729,
# directly and each over its own round's vanilla; geometric means with 95 %
# intervals (Student t on the logarithms). usage: python3 sum.py [LAST]
import json, math, os, statistics as st, sys
here = os.path.dirname(os.path.abspath(__file__))
T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23,
        11: 2.20, 12: 2.18, 13: 2.16, 14: 2.14, 15: 2.13, 16: 2.12, 17: 2.11, 18: 2.10, 19: 2.09, 20: 2.09}

def rates(f):
    out = {}
    for r in json.load(open(f))['results']:
        if r['layout'] == 'docker':
            out[r['mode']] = r['runs'][0]['pps']
    return out

def geo(label, xs):
    l = [math.log(x) for x in xs]
    m = st.mean(l)
    if len(l) < 2:
        print(f'{label}: {math.exp(m):.3f}')
        return
    h = T975[len(l) - 1] * st.stdev(l) / math.sqrt(len(l))
    print(f'{label}: {math.exp(m):.3f} ({math.exp(m - h):.3f}-{math.exp(m + h):.3f}), {len(l)} rounds, median {st.median(xs):.3f}')

rows = []
for i in range(1, int(sys.argv[1]) + 1 if len(sys.argv) > 1 else 21):
    try:
        o, n = rates(f'{here}/old-{i}.json'), rates(f'{here}/new-{i}.json')
    except (OSError, KeyError, IndexError) as e:
        continue
    rows.append((o['fastpath'], o['vanilla'], n['fastpath'], n['vanilla']))
    of, ov, nf, nv = rows[-1]
    print(f'{i}: old fp {of:.0f} van {ov:.0f} ({of/ov:.2f})  new fp {nf:.0f} van {nv:.0f} ({nf/nv:.2f})  new/old fp {nf/of:.3f}')
if rows:
    geo('new/old fast path', [r[2] / r[0] for r in rows])
    geo('new/old vanilla (the A/A control: the same kernel path, two harnesses)', [r[3] / r[1] for r in rows])
    geo('new/old of each over its own vanilla', [(r[2] / r[3]) / (r[0] / r[1]) for r in rows])
