#!/usr/bin/env python3
"""The side by side with Cilium from run.sh's files (LAYOUT-ROUND.json):
for each workload, each configuration's rate divided by the same round's
Flannel vanilla (k8s/vanilla) and by the same round's Cilium, geometric
mean over the rounds with a 95 % interval (Student t on the logarithms);
beside it the machine's busy CPU time per packet (both CPUs, senders and
receivers alike: they share this machine). A run whose window still lost
more than STEAL % of a CPU to the hypervisor after --max-steal's repeats is
left out, whatever its configuration, and listed. Writes chart.svg beside it.
Usage: sum.py DIR"""
import glob, json, math, os, re, sys
from collections import defaultdict

T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}
CONFIGS = [("host", "vanilla", "host"), ("k8s", "vanilla", "flannel"), ("k8s", "vanilla@aa", "flannel A/A"),
           ("k8s", "auto", "flannel + falcon default"), ("k8s", "fastpath", "flannel + fastpath"),
           ("k8s-cilium", "vanilla", "cilium"), ("k8s-cilium", "vanilla@aa", "cilium A/A")]
UNITS = {"tcp": ("gbps", "Gbit/s"), "multi-flow-tcp": ("pps", "segments/s"), "latency-tcp": ("pps", "transactions/s"),
         "memcached": ("pps", "operations/s"), "web": ("pps", "requests/s"), "udp-stress": ("pps", "datagrams/s")}


STEAL = 5


def load(d):
    """(workload label) -> (layout, mode) -> round -> (rate, cpu µs per packet, p99)"""
    by = defaultdict(lambda: defaultdict(dict))
    left = []
    for f in glob.glob(os.path.join(d, "*-[0-9]*.json")):
        rnd = int(re.search(r"-(\d+)\.json$", f).group(1))
        for r in json.load(open(f))["results"]:
            key, unit = UNITS[r["workload"]]
            size = f'{r["size"] // 1024} KiB' if r["size"] % 1024 == 0 else f'{r["size"]} B'
            label = f'{r["workload"]} {size}' + (f' ×{r["flows"]}' if r["flows"] > 1 else "")
            for run in r.get("runs", []):
                v, pps = run.get(key), run.get("pps")
                if not v or not pps:
                    continue
                if run.get("steal_pct", 0) > STEAL:
                    left.append(f'{os.path.basename(f)} {r["layout"]}/{r["mode"]} {r["workload"]} {r["size"]}: steal {run["steal_pct"]:.0f} %')
                    continue
                busy = sum(run.get("busy_pct", {}).values()) / 100
                p99 = (run.get("latency") or {}).get("p99_us")
                by[(label, unit)][(r["layout"], r["mode"])][rnd] = (v, busy / pps * 1e6, p99)
    return by, left


def ratio(runs, base, i=0):
    logs = [math.log(v[i] / base[k][i]) for k, v in runs.items() if k in base and v[i] and base[k][i]]
    if len(logs) < 2:
        return None
    n, mu = len(logs), sum(logs) / len(logs)
    h = T95.get(n - 1, 2.0) * math.sqrt(sum((x - mu) ** 2 for x in logs) / (n - 1)) / math.sqrt(n)
    return math.exp(mu), math.exp(mu - h), math.exp(mu + h), n


def num(v):
    return f"{v:.2f}" if v < 100 else f"{v / 1000:.1f} k"


def fmt(r):
    return "—" if r is None else f"{r[0]:.2f} ({r[1]:.2f}–{r[2]:.2f})"


def table(by):
    print("| workload | metric | configuration | median | vs flannel | vs cilium | CPU µs/packet | rounds |")
    print("|---|---|---|---:|---|---|---:|---:|")
    bars = []
    for (label, unit), cfg in sorted(by.items()):
        fl, ci = cfg.get(("k8s", "vanilla"), {}), cfg.get(("k8s-cilium", "vanilla"), {})
        for layout, mode, name in CONFIGS:
            runs = cfg.get((layout, mode))
            if not runs:
                continue
            vals = sorted(v[0] for v in runs.values())
            cpu = sorted(v[1] for v in runs.values())
            vf, vc = ratio(runs, fl), ratio(runs, ci)
            print(f"| {label} | {unit} | {name} | {num(vals[len(vals) // 2])} | {fmt(vf)} | {fmt(vc)} | "
                  f"{cpu[len(cpu) // 2]:.3g} | {len(runs)} |")
            if "A/A" not in name and vf:
                bars.append((label, name, vf))
    return bars


def svg(bars, out):
    names = [c[2] for c in CONFIGS if "A/A" not in c[2]]
    colours = ["#888", "#4477aa", "#ee7733", "#228833", "#aa3377"]
    labels = list(dict.fromkeys(b[0] for b in bars))
    top = max(b[2][2] for b in bars) * 1.05
    w, h, x0, y0, gw = 140 * len(labels) + 80, 360, 60, 300, 140
    y = lambda v: y0 - v / top * 260
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="10">',
         f'<text x="{x0}" y="14" font-size="12">rate / Flannel vanilla (95 % interval), 2 vCPUs</text>',
         f'<line x1="{x0}" x2="{w}" y1="{y(1):.1f}" y2="{y(1):.1f}" stroke="#000" stroke-dasharray="3"/>']
    for gi, label in enumerate(labels):
        for bi, name in enumerate(names):
            r = next((b[2] for b in bars if b[0] == label and b[1] == name), None)
            if r is None:
                continue
            x = x0 + gi * gw + bi * 24
            s.append(f'<rect x="{x}" y="{y(r[0]):.1f}" width="20" height="{y0 - y(r[0]):.1f}" fill="{colours[bi]}"/>')
            s.append(f'<line x1="{x + 10}" x2="{x + 10}" y1="{y(r[1]):.1f}" y2="{y(r[2]):.1f}" stroke="#000"/>')
        s.append(f'<text x="{x0 + gi * gw}" y="{y0 + 14}">{label}</text>')
    for bi, name in enumerate(names):
        s.append(f'<rect x="{x0 + bi * 150}" y="{h - 26}" width="10" height="10" fill="{colours[bi]}"/>'
                 f'<text x="{x0 + bi * 150 + 14}" y="{h - 17}">{name}</text>')
    s.append('</svg>')
    open(out, "w").write("\n".join(s) + "\n")


d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__)
by, left = load(d)
svg(table(by), os.path.join(d, "chart.svg"))
print(f"\nLeft out (steal over {STEAL} % after 3 repeats): {len(left)}")
for x in left:
    print("-", x)
