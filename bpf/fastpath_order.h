/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* Order on the sending host (sender-rps; docs/fastpath.md#order). A TCP
 * sender transmits from two CPUs, the application's and the one its ACKs
 * arrive on, and veth queues each packet on the backlog of the CPU that
 * sent it; the two backlogs drain on their own and the host forwards the
 * flow out of order. With RPS on the container's host-side veth, the hash
 * set here picks the one backlog a flow's data waits on: that of its home,
 * the CPU that sent its first data (the application's, which writes it),
 * so that only what another CPU sends moves. A hash of RPS's own choice
 * would move the flow's work to a CPU picked by chance, the receiver's as
 * often as not. A pure ACK, SYN or SYN-ACK carries nothing to overtake and
 * stays where it was sent: a receiver's ACKs, sent where its data arrives
 * and where its application reads, moved to one CPU made the sender's ACK
 * processing (and so the sender) run there too. A flow quiet for twice the
 * guard's bound takes a new home: nothing of it is still queued. */
#ifndef FALCON_FASTPATH_ORDER_H
#define FALCON_FASTPATH_ORDER_H

#include "fastpath.h"
#include "fastpath_parse.h"
#include "rpshash.h"

#define ETH_P_ARP 0x0806

FLOW_MAP(fp_homes, struct fp_home); /* fastpath.c's: one LRU entry per flow */

/* The flow's home; a new one, here, for a flow unseen or quiet. */
static __always_inline __u32 home_of(struct fp_key *k, __u32 cur, __u64 now)
{
	struct fp_home *h = bpf_map_lookup_elem(&fp_homes, k), fresh = {};

	if (h && now - h->last_ns <= 2 * GUARD_NS) {
		touch(&h->last_ns, now);
		return h->cpu;
	}
	fresh.cpu = cur;
	fresh.last_ns = now;
	bpf_map_update_elem(&fp_homes, k, &fresh, BPF_ANY);
	return cur;
}

/* Whether a packet has anything a later one could overtake: data, or a
 * FIN or RST, which must come after it. */
static __always_inline int carries_order(struct __sk_buff *skb, struct inner *in)
{
	if (in->k.proto != PROTO_TCP || (in->tcp_flags & 0x05)) /* FIN | RST */
		return 1;
	return skb->len > ETH_HLEN + sizeof(struct iphdr4) + in->l4len;
}

/* Is skb an ARP frame? */
static __always_inline int is_arp(struct __sk_buff *skb)
{
	__be16 proto;

	return !bpf_skb_load_bytes(skb, 12, &proto, sizeof(proto)) && proto == bpf_htons(ETH_P_ARP);
}

/* The container's end, egress: before veth_xmit picks the backlog. It runs
 * whether the caches are on or not (the agent judging the host's rules),
 * as the backlog a flow waits on must not change with them. A packet the
 * parser leaves alone (not IPv4 TCP/UDP, a fragment) keeps its own hash:
 * RPS still puts it on one backlog per flow, by the kernel's hash. ARP is
 * the exception: it has nothing to overtake and stays where it was sent,
 * so that a reply answered on this host (a VXLAN device's proxy, a
 * veth's proxy_arp) comes back on the sender's CPU, where the datagrams
 * that waited for it then leave the neighbour's queue. On another CPU
 * they would give their flow its home there: by the kernel's hash, one
 * CPU for every ARP frame of a boot, on the 2-vCPU guest the receiver's
 * (the sender's and the receiver's whole path then shared it, and UDP
 * stress lost its datagrams to the receiving socket's full buffer). */
SEC("tc")
int fpath_pod_eg(struct __sk_buff *skb)
{
	__u32 zero = 0, cur = bpf_get_smp_processor_id(), home, idx, n, fh;
	struct fp_config *c = bpf_map_lookup_elem(&fp_conf, &zero);
	struct inner in;
	int r;

	if (!c || !c->send_n || c->send_n > MAX_CPUS)
		return PASS;
	n = c->send_n;
	r = inner_ip4(skb, ETH_HLEN, &in);
	if (r == NOT_IP4 && is_arp(skb)) {
		home = cur;
		fh = hash32(cur);
	} else if (r) {
		return PASS;
	} else {
		home = cur;
		if (carries_order(skb, &in)) {
			home = home_of(&in.k, cur, now_ns());
			if (home != cur)
				count(FP_SEND_MOVED);
		}
		fh = hash32(in.k.saddr ^ in.k.daddr ^ ((__u32)in.k.sport << 16 | in.k.dport) ^ in.k.proto);
	}
	idx = home < MAX_CPUS ? c->send_pos[home & (MAX_CPUS - 1)] : 0;
	/* Home outside the map: one backlog still, by the flow's hash. */
	idx = idx && idx <= n ? idx - 1 : fh % n;
	bpf_set_hash(skb, steer_hash(fh, idx, n));
	return PASS;
}

#endif
