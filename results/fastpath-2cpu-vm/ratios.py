#!/usr/bin/env python3
"""Paired ratios of an interleaved bench: each mode's run divided by the
same round's run of the baseline mode (vanilla of the same layout, or the
host layout's vanilla), geometric mean with a 95 % interval (Student t on
the logarithms). Usage: ratios.py FILE.json [METRIC]  (METRIC: pps, gbps or
p99; default: the workload's headline)."""
import json, math, sys
from collections import defaultdict

T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}

def metric(wl):
    return {"tcp": "gbps", "latency": "p99_us"}.get(wl, "pps")

def value(run, m):
    if m.endswith("_us"):
        return (run.get("latency") or {}).get(m)
    return run.get(m)

def main():
    d = json.load(open(sys.argv[1]))
    by = defaultdict(dict)  # (layout, workload, size) -> mode -> {round: value}
    for r in d["results"]:
        m = sys.argv[2] if len(sys.argv) > 2 else metric(r["workload"])
        for run in r.get("runs", []):
            v = value(run, m)
            if v:
                by[(r["layout"], r["workload"], r["size"], m)].setdefault(r["mode"], {})[run["round"]] = v
    host = {(w, s, m): modes.get("vanilla", {}) for (l, w, s, m), modes in by.items() if l == "host"}
    print("| layout | workload | size | metric | mode | vs | runs | ratio (95 % interval) |")
    print("|---|---|---:|---|---|---|---:|---|")
    for (l, w, s, m), modes in sorted(by.items()):
        if l == "host":
            continue
        bases = [("vanilla", modes.get("vanilla", {}))]
        if host.get((w, s, m)):
            bases.append(("host", host[(w, s, m)]))
        for mode, runs in sorted(modes.items()):
            for bname, base in bases:
                if mode == "vanilla" and bname == "vanilla":
                    continue
                logs = [math.log(v / base[k]) for k, v in runs.items() if k in base]
                if len(logs) < 2:
                    continue
                n = len(logs)
                mu = sum(logs) / n
                sd = math.sqrt(sum((x - mu) ** 2 for x in logs) / (n - 1))
                h = T95.get(n - 1, 2.0) * sd / math.sqrt(n)
                print(f"| {l} | {w} | {s} B | {m} | {mode} | {bname} | {n} | "
                      f"{math.exp(mu):.2f} ({math.exp(mu - h):.2f}–{math.exp(mu + h):.2f}) |")

main()
