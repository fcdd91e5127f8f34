#!/usr/bin/env python3
"""Per receive stage of the receiving host, from stages.sh's files: NET_RX
softirq time per packet the applications got (µs), summed over CPUs and
averaged over the runs. Usage: stages.py DIR"""
import glob, json, os, sys
from collections import defaultdict

d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__)
rows = defaultdict(lambda: defaultdict(list))  # (workload, config) -> stage -> [µs/packet per run]
for f in sorted(glob.glob(os.path.join(d, "stages-*.json"))):
    for r in json.load(open(f))["results"]:
        cfg = {"k8s": "flannel", "k8s-cilium": "cilium"}[r["layout"]] + ("" if r["mode"] == "vanilla" else " + " + r["mode"])
        for run in r["runs"]:
            pkts = run["pps"] * run["window_s"]
            per = defaultdict(float)
            for s in run.get("stages", []):
                per[s["stage"]] += s["ns"] / 1000 / pkts
            for st, v in per.items():
                rows[(r["workload"], cfg)][st].append(v)
stages = sorted({st for v in rows.values() for st in v})
print("| workload | configuration | " + " | ".join(stages) + " | total |")
print("|---|---|" + "---:|" * (len(stages) + 1))
for (w, cfg), v in sorted(rows.items()):
    means = {st: sum(x) / len(x) for st, x in v.items()}
    cells = [f"{means[st]:.2f}" if st in means else "—" for st in stages]
    print(f"| {w} | {cfg} | " + " | ".join(cells) + f" | {sum(means.values()):.2f} |")
