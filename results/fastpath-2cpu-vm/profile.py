#!/usr/bin/env python3
"""CPU time per delivered datagram, by CPU and by stage, from profile.sh's
perf samples. A sample goes to the innermost frame of its call chain that
names a stage (a BPF program inside the bridge counts as BPF); samples of
processes other than the benchmark's and the kernel's idle loop are left
out. Usage: profile.py DIR LAYOUT/MODE..."""
import gzip, json, re, sys
from collections import Counter, defaultdict

STAGES = [  # (stage, pattern on a frame's symbol), tried from the leaf up
    ("falcon BPF", r"^bpf_prog_"),
    ("netfilter", r"^(nf_hook_slow|nft_do_chain|ipt_do_table|nf_conntrack_in|br_nf_)"),
    ("bridge", r"^br_"),
    ("vxlan, UDP GRO", r"^(vxlan_|udp_tunnel|iptunnel_|gro_cells|udp_gro_receive|udp4_gro_receive)"),
    ("skb free (deferred)", r"^(skb_defer_free_flush|skb_attempt_defer_free)"),
    ("veth + backlog", r"^(veth_|process_backlog|enqueue_to_backlog|netif_rx|__netif_rx)"),
    ("socket delivery + wakeup", r"^(__udp4_lib_rcv|udp_queue_rcv|udp_unicast_rcv_skb|sock_def_readable)"),
    ("IP receive/route", r"^(ip_rcv|ip_list_rcv|ip_sublist_rcv|ip_route_input|ip_forward|fib_)"),
    ("receiver syscall", r"^(udp_recvmsg|__sys_recvfrom|__skb_recv_udp)"),
    ("sender syscall", r"^(udp_sendmsg|__sys_sendto|ip_output|ip_finish_output2)"),
    ("other kernel", r"^(entry_SYSCALL|do_syscall_64|handle_softirqs|asm_)"),
]
STAGE_RE = [(s, re.compile(p)) for s, p in STAGES]
IDLE = re.compile(r"^(pv_native_safe_halt|default_idle|cpuidle|do_idle)")
APPS = {"sockperf", "swapper", "ksoftirqd/0", "ksoftirqd/1"}


def samples(path):
    """Yields (comm, cpu, [symbols leaf first]) per sample."""
    comm = cpu = None
    frames = []
    with gzip.open(path, "rt", errors="replace") as f:
        for line in f:
            if not line.strip():
                if comm is not None:
                    yield comm, cpu, frames
                comm, frames = None, []
                continue
            if not line.startswith("\t") and "[" in line:
                head, _, rest = line.rpartition("[")
                comm, cpu = head.strip(), int(rest.split("]")[0])
                continue
            parts = line.split(None, 1)
            user = not parts[0].startswith("ffff")
            frames.append(("user:" if user else "") + (parts[1].strip() if len(parts) > 1 else ""))
    if comm is not None:
        yield comm, cpu, frames


def stage(comm, frames):
    if frames and IDLE.match(frames[0]):
        return "idle"
    for sym in frames:
        for name, rx in STAGE_RE:
            if rx.match(sym):
                return name
    if frames and frames[0].startswith("user:"):
        return "application (user)"
    return "other kernel"


def main():
    d, tags = sys.argv[1], sys.argv[2:]
    table = {}
    for lm in tags:
        tag = lm.replace("/", "-")
        res = json.load(open(f"{d}/{tag}.json"))["results"][0]
        pps = res["runs"][0]["pps"]
        per_cpu = Counter()
        by = defaultdict(Counter)
        for comm, cpu, frames in samples(f"{d}/{tag}.stacks.gz"):
            per_cpu[cpu] += 1
            if comm.split("/")[0] not in {a.split("/")[0] for a in APPS}:
                by[cpu]["(other processes)"] += 1
                continue
            by[cpu][stage(comm, frames)] += 1
        # Each CPU was sampled over the same 5 s: a sample is 5 s / that CPU's count.
        table[lm] = (pps, {c: {s: n * 5e6 / per_cpu[c] / (pps * 5) for s, n in by[c].items()} for c in by})
    stages = [s for s, _ in STAGES] + ["application (user)", "idle", "(other processes)"]
    print("µs of CPU per delivered datagram (UDP stress 16 B, docker layout unless host), by stage:\n")
    for cpu in (0, 1):
        print(f"CPU {cpu} ({'senders, and every softirq of the path' if cpu == 0 else 'the receiving application'}):\n")
        print("| stage | " + " | ".join(tags) + " |")
        print("|---|" + "---:|" * len(tags))
        for s in stages:
            print(f"| {s} | " + " | ".join(f"{table[t][1].get(cpu, {}).get(s, 0):.3f}" for t in tags) + " |")
        busy = [sum(v for k, v in table[t][1].get(cpu, {}).items() if k not in ("idle", "(other processes)")) for t in tags]
        print("| **busy, total** | " + " | ".join(f"**{b:.3f}**" for b in busy) + " |\n")
    print("| datagrams/s in the run | " + " | ".join(f"{table[t][0]/1e3:.1f}k" for t in tags) + " |")


if __name__ == "__main__":
    main()
