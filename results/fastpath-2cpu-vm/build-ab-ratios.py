#!/usr/bin/env python3
"""Ratios of build-ab.sh's benches: per build, each mode over vanilla of the
same run of the same bench, and per mode, the new build over the old of the
same round and run index; geometric means with a 95 % Student t interval
on the logarithms. Also the share of datagrams the receiving socket dropped
for a full buffer (Udp RcvbufErrors over what reached it) and the RPS
requests CPU 1 took a run (received_rps: work queued there from CPU 0).
Usage: build-ab-ratios.py TAG [ROUNDS] [DIR]"""
import json, math, statistics as st, sys

T = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26, 11: 2.23, 12: 2.20}


def load(d, tag, build, r):
    out = {}
    for res in json.load(open(f"{d}/{tag}-{build}-{r}.json"))["results"]:
        out[(res["workload"], res["mode"])] = res["runs"]
    return out


def value(run, w):
    return run["gbps"] if w == "tcp" else run["pps"]


def ci(logs):
    m = st.mean(logs)
    h = T.get(len(logs), 2.2) * st.stdev(logs) / math.sqrt(len(logs))
    return f"{math.exp(m):.2f} ({math.exp(m - h):.2f}-{math.exp(m + h):.2f}) n={len(logs)}"


def main():
    tag = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    d = sys.argv[3] if len(sys.argv) > 3 else "/var/tmp"
    data = {b: [load(d, tag, b, r) for r in range(1, rounds + 1)] for b in ("old", "new")}
    keys = sorted(data["old"][0])
    for w, mode in keys:
        for b in ("old", "new"):
            runs = [x for rd in data[b] for x in rd[(w, mode)]]
            got = sum(x["counters"].get("rx.Udp.InDatagrams", 0) for x in runs)
            full = sum(x["counters"].get("rx.Udp.RcvbufErrors", 0) for x in runs)
            line = f"{w:10} {mode:9} {b}: {st.mean(value(x, w) for x in runs) / 1e3:7.1f}k mean"
            if got + full:
                line += f", socket buffer full for {100 * full / (got + full):.1f} % of datagrams"
            line += f", CPU 1 took {st.mean(x['cpu']['1'].get('received_rps', 0) for x in runs):.0f} RPS requests a run"
            if mode != "vanilla" and (w, "vanilla") in data[b][0]:
                logs = [math.log(value(x, w) / value(v, w)) for rd in data[b] for x, v in zip(rd[(w, mode)], rd[(w, "vanilla")])]
                line += f"; over vanilla {ci(logs)}"
            print(line)
        logs = [math.log(value(n, w) / value(o, w)) for ro, rn in zip(data["old"], data["new"])
                for o, n in zip(ro[(w, mode)], rn[(w, mode)])]
        print(f"{w:10} {mode:9} new/old: {ci(logs)}")


main()
