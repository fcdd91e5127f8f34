// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/* falcon's cached fast path (docs/fastpath.md): tc programs that let a
 * flow the overlay has already carried skip the overlay's devices.
 *
 *   fpath_nic_in   NIC, ingress: a cached VXLAN packet loses its outer
 *                  headers, gets the Ethernet header the slow path gave it
 *                  and goes straight into the container (bpf_redirect_peer).
 *   fpath_veth_eg  container's host-side veth, egress: where the host's
 *                  part of the slow path ends; learns ingress entries.
 *   fpath_pod_in   the container's end, ingress: past the veth's backlog,
 *                  where a slow packet has really arrived (the guard).
 *   fpath_pod_eg   the container's end, egress: sender order (fastpath_order.h).
 *   fpath_veth_in  container's host-side veth, ingress: a cached packet gets
 *                  the outer headers the VXLAN device built for its flow and
 *                  leaves by the NIC (bpf_redirect).
 *   fpath_nic_eg   NIC, egress: where the slow path's egress ends; learns
 *                  egress entries.
 *
 * Nothing is guessed: an entry holds what the slow path was seen to do to
 * the flow after the host's netfilter accepted it, and only while the
 * agent's generation (bumped on any change of rules, routes, neighbours,
 * links or containers) is the one it was learned under. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "fastpath.h"
#include "fastpath_parse.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* TC_ACT_UNSPEC (TCX_NEXT): a packet the fast path leaves alone goes on to
 * the next program at the hook (falcon's steering, in falcon+fastpath). */
#define PASS TC_ACT_UNSPEC

#define INNER_IP 64   /* the inner IPv4 header behind OUTER_LEN and the inner Ethernet */
#define GUARD_NS 1000000000ULL /* a packet can't sit in the kernel's queues this long */
#define TOUCH_NS 1000000000ULL /* how often a used entry's clock is written */
#define TCP_CTRL 0x07 /* FIN | SYN | RST */

struct fp_counters {
	__u64 n[FP_CNT_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_config);
} fp_conf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_counters);
} fp_stats SEC(".maps");

#define FLOW_MAP(name, vtype)                          \
	struct {                                       \
		__uint(type, BPF_MAP_TYPE_LRU_HASH);   \
		__uint(max_entries, FP_FLOWS);         \
		__type(key, struct fp_key);            \
		__type(value, vtype);                  \
	} name SEC(".maps")

FLOW_MAP(fp_in, struct fp_ingress);
FLOW_MAP(fp_eg, struct fp_egress);
FLOW_MAP(fp_pend_in, struct fp_pending);
FLOW_MAP(fp_pend_eg, struct fp_pending);

static __always_inline void count(enum fp_counter c)
{
	__u32 zero = 0;
	struct fp_counters *s = bpf_map_lookup_elem(&fp_stats, &zero);

	if (s && c < FP_CNT_MAX)
		s->n[c]++;
}

/* The fast path's clock. Each bound it keeps is a second (GUARD_NS,
 * TOUCH_NS, the agent's renewal), so the coarse clock, at most a tick
 * behind CLOCK_MONOTONIC, is exact enough; the precise one reads the TSC,
 * which cost a quarter of the programs' time on a KVM guest (0.17 us a
 * datagram over the four programs on its path). */
static __always_inline __u64 now_ns(void)
{
	return bpf_ktime_get_coarse_ns();
}

static __always_inline void touch(__u64 *used, __u64 now)
{
	if (now - *used > TOUCH_NS)
		*used = now;
}

/* The configuration, or 0 while the fast path is off. */
static __always_inline struct fp_config *config(void)
{
	__u32 zero = 0;
	struct fp_config *c = bpf_map_lookup_elem(&fp_conf, &zero);

	return c && c->on ? c : 0;
}

/* May the caches be used and taught now? Not once the agent has stopped
 * renewing them: a killed agent's programs, whose caches no one
 * invalidates any more, stop using them within a second. They go on
 * counting what they hand to the slow path and what arrives, so that when
 * a late agent is back the guard knows what is still in flight. */
static __always_inline int trusted(struct fp_config *c, __u64 now)
{
	return now < c->alive_until_ns;
}

#include "fastpath_share.h"
#include "fastpath_gso.h"
#include "fastpath_guard.h"
#include "fastpath_ct.h"
#include "fastpath_order.h"

/* napi_poll(napi, work, budget) fires once the poll has returned. */
SEC("tp_btf/napi_poll")
int fpath_poll(__u64 *ctx)
{
	__u32 zero = 0;
	struct fp_ring *r = bpf_map_lookup_elem(&fp_arrivals, &zero);

	if (!r || !r->n)
		return 0;
#pragma clang loop unroll(full)
	for (int j = 0; j < FP_RING; j++) {
		__u32 i = (r->head - 1 - j) & (FP_RING - 1);

		if (j < r->n)
			arrived(&fp_pend_in, &r->k[i], r->segs[i]);
	}
	r->n = 0;
	return 0;
}

/* Where the slow path has done all it does to a packet of the flow, with
 * its pending record p (some in flight): may the packet teach the cache?
 * Only if every packet in flight was handed over under the current
 * generation and the slow path changed nothing but, at most, one hop of
 * TTL (*ttl_dec). */
static __always_inline int teaches(struct fp_pending *p, struct inner *in, struct fp_config *c, __u8 *ttl_dec)
{
	if (p->gen != c->gen || c->gen == 0)
		return 0;
	/* Packets of more than one identity in flight: the one delivered here
	 * may be any of them, and its identity is not known here. */
	if (p->mixed) {
		count(FP_SPOOF);
		return 0;
	}
	if (p->varies || p->tos != in->tos || (__u8)(p->ttl - in->ttl) > 1) {
		count(FP_CHANGED);
		return 0;
	}
	*ttl_dec = p->ttl - in->ttl;
	return 1;
}

/* Rewrites byte at of the IPv4 header at off (to v; with dec, to one less
 * than it was) and fixes the header checksum. */
static __always_inline int ip_byte(struct __sk_buff *skb, __u32 off, __u32 at, __u8 v, int dec)
{
	__be16 old, new;
	__u32 w = off + (at & ~1);

	if (bpf_skb_load_bytes(skb, w, &old, sizeof(old)))
		return -1;
	new = old;
	((__u8 *)&new)[at & 1] = dec ? ((__u8 *)&old)[at & 1] - 1 : v;
	if (bpf_l3_csum_replace(skb, off + 10, old, new, sizeof(new)))
		return -1;
	return bpf_skb_store_bytes(skb, w, &new, sizeof(new), 0);
}

/* Decrements the IPv4 TTL at off and fixes the header checksum. */
static __always_inline int ttl_dec(struct __sk_buff *skb, __u32 off)
{
	return ip_byte(skb, off, 8, 0, 1);
}

#define ECN_CE 3

/* RFC 6040 decapsulation as the kernel does it (INET_ECN_decapsulate): a
 * CE outer marks an ECN-capable inner CE; a CE outer over a Not-ECT inner
 * is dropped, which only the slow path may do (-1). 1: mark CE. */
static __always_inline int ecn_decap(struct outer *o, struct inner *in)
{
	if ((o->tos & ECN_CE) != ECN_CE)
		return 0;
	return in->tos & ECN_CE ? 1 : -1;
}

SEC("tc")
int fpath_nic_in(struct __sk_buff *skb)
{
	__u64 now = now_ns();
	struct fp_config *c = config();
	struct fp_pending init = {};
	struct fp_ingress *e;
	struct outer o;
	struct inner in;
	int r, why;

	mark_path(skb, 0); /* a mark from the sending host's fast path ends here */
	if (!c) {
		blind_now(FP_DIR_IN, now);
		return PASS;
	}
	if (vxlan_outer(skb, c, &o, 1))
		return PASS;
	r = inner_ip4(skb, INNER_IP, &in);
	if (r == NOT_IP4)
		return PASS;
	if (r) {
		count(FP_NOT_ELIGIBLE);
		return PASS;
	}
	e = trusted(c, now) ? bpf_map_lookup_elem(&fp_in, &in.k) : 0;
	if (!e) {
		count(FP_IN_MISS);
	} else if (e->gen != c->gen) {
		count(FP_STALE);
	} else if (e->remote != o.saddr || e->local != o.daddr || e->vni != o.vni || e->port != o.port) {
		/* The entry goes: had it learned a forger's identity, the
		 * flow's own packets end it (docs/fastpath.md, Identity). */
		count(FP_SPOOF);
		forget_in(&in.k, e);
	} else if (in.tcp_flags & TCP_CTRL) {
		count(FP_CONTROL);
		if (in.tcp_flags & 0x05) /* FIN or RST: the flow ends, relearn a new one */
			forget_in(&in.k, e);
	} else if ((why = unusable(c, e->used_ns, e->ct, now)) != FP_CNT_MAX) {
		count(why);
		if (why == FP_IDLE)
			forget_in(&in.k, e);
	} else if (!whole_ok(skb, &in, e)) {
		count(FP_NOT_ELIGIBLE);
	} else if (!o.sane || in.ttl <= e->ttl_dec || ecn_decap(&o, &in) < 0 || (o.udp_check && udp_unsummed(&in))) {
		/* What the kernel would drop or answer with an error: headers
		 * ip_rcv or udp_rcv refuses, a TTL routing would expire, CE
		 * over Not-ECT. The outer UDP checksum is not verified here:
		 * the inner one catches what it would, except where an inner
		 * UDP packet has none, which udp_rcv must verify. */
		count(FP_NOT_ELIGIBLE);
	} else if (!guard_open(&fp_pend_in, FP_DIR_IN, &in.k, now)) {
		count(FP_GUARD_WAIT);
	} else {
		__u8 eth[14];
		__u32 ifindex = e->ifindex;
		int dec = e->ttl_dec;
		int ce = ecn_decap(&o, &in);

		__builtin_memcpy(eth, e->eth, sizeof(eth));
		touch(&e->used_ns, now);
		/* FIXED_GSO: a TCP aggregate keeps its segments' size (the
		 * helper would grow it by the headers it takes away).
		 * NO_CSUM_RESET and DEC: of the checksums the NIC or GRO
		 * verified, the outer UDP's goes, as udp_rcv takes it off;
		 * the inner ones stay verified (the helper would forget all). */
		if (bpf_skb_adjust_room(skb, -OUTER_LEN, BPF_ADJ_ROOM_MAC,
					c->decap_flags | BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_NO_CSUM_RESET)) {
			count(FP_HELPER_FAIL);
			goto slow;
		}
		bpf_csum_level(skb, BPF_CSUM_LEVEL_DEC);
		/* From here the packet is decapsulated: it can only go on. */
		if (bpf_skb_store_bytes(skb, 0, eth, sizeof(eth), 0) || (dec && ttl_dec(skb, ETH_HLEN)) ||
		    (ce && ip_byte(skb, ETH_HLEN, 1, in.tos | ECN_CE, 0))) {
			count(FP_HELPER_FAIL);
			return TC_ACT_SHOT;
		}
		count(FP_IN_HIT);
		return marked_fast(skb, bpf_redirect_peer(ifindex, 0));
	}
slow:
	init.outer_saddr = o.saddr;
	init.outer_daddr = o.daddr;
	init.vni = o.vni;
	init.port = o.port;
	to_slow(&fp_pend_in, FP_DIR_IN, &in, &init, c, now, segs_of(skb));
	return PASS;
}

SEC("tc")
int fpath_pod_in(struct __sk_buff *skb)
{
	__u64 now = now_ns();
	struct fp_config *c = config();
	struct inner in;

	if (!c || !slow_recent(FP_DIR_IN, now) || came_fast(skb))
		return PASS;
	if (!inner_ip4(skb, ETH_HLEN, &in)) {
		struct fp_pending *p = bpf_map_lookup_elem(&fp_pend_in, &in.k);

		if (p && p->inflight)
			note_arrival(&in.k, segs_of(skb));
	}
	return PASS;
}

SEC("tc")
int fpath_veth_eg(struct __sk_buff *skb)
{
	__u64 now = now_ns();
	struct fp_config *c = config();
	struct fp_ingress e = {}, *old;
	struct fp_pending *p;
	struct inner in;
	__u8 dec = 0;
	int fresh;

	if (!c || !trusted(c, now) || !slow_recent(FP_DIR_IN, now))
		return PASS;
	if (inner_ip4(skb, ETH_HLEN, &in))
		return PASS;
	p = bpf_map_lookup_elem(&fp_pend_in, &in.k);
	if (!p || !p->inflight || !teaches(p, &in, c, &dec) || (in.tcp_flags & TCP_CTRL))
		return PASS;
	if (bpf_skb_load_bytes(skb, 0, e.eth, sizeof(e.eth)))
		return PASS;
	e.gen = c->gen;
	e.ifindex = skb->ifindex;
	e.remote = p->outer_saddr;
	e.local = p->outer_daddr;
	e.vni = p->vni;
	e.port = p->port;
	e.ttl_dec = dec;
	e.used_ns = now;
	old = bpf_map_lookup_elem(&fp_in, &in.k);
	fresh = !old || old->gen != c->gen;
	e.ct = ct_learned(c, &in.k, fresh ? FP_CT_WAIT : old->ct);
	if (!take_in(c, old, &e) || bpf_map_update_elem(&fp_in, &in.k, &e, BPF_ANY))
		return PASS;
	count(FP_IN_LEARN);
	if (fresh && e.ct == FP_CT_WAIT)
		ct_ask(&in.k, FP_DIR_IN, e.gen);
	return PASS;
}

/* Writes the learned outer headers in front of the packet (room made),
 * with this packet's lengths, IP ID and header checksum, and with csum the
 * outer UDP checksum the slow path would send (outer_check). */
static __always_inline int encap(struct __sk_buff *skb, struct fp_egress *e, struct inner *in, int csum)
{
	__u8 hdr[FP_HDR] __attribute__((aligned(8)));
	struct iphdr4 *ip = (void *)(hdr + ETH_HLEN);
	struct udphdr_ *udp = (void *)(hdr + ETH_HLEN + 20);
	__u64 flags = BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 | BPF_F_ADJ_ROOM_ENCAP_L4_UDP |
		      BPF_F_ADJ_ROOM_ENCAP_L2_ETH | BPF_F_ADJ_ROOM_ENCAP_L2(ETH_HLEN);
	__u32 len;

	__builtin_memcpy(hdr, e->hdr, sizeof(hdr));
	if (bpf_skb_adjust_room(skb, OUTER_LEN, BPF_ADJ_ROOM_MAC, flags))
		return -1;
	len = skb->len;
	/* The outer ECN as ip_tunnel_ecn_encap sets it, from this packet's
	 * (the DSCP is the learned one: fpath_veth_in checked the inner's). */
	ip->tos = (ip->tos & ~ECN_CE) | ((in->tos & ECN_CE) == ECN_CE ? 2 : in->tos & ECN_CE);
	ip->tot_len = bpf_htons(len - ETH_HLEN);
	ip->id = bpf_get_prandom_u32();
	ip->check = 0;
	ip->check = ~ip4_sum(ip);
	udp->len = bpf_htons(len - ETH_HLEN - 20);
	udp->check = 0;
	if (csum)
		udp->check = outer_check(hdr, in);
	return bpf_skb_store_bytes(skb, 0, hdr, sizeof(hdr), 0);
}

SEC("tc")
int fpath_veth_in(struct __sk_buff *skb)
{
	__u64 now = now_ns();
	struct fp_config *c = config();
	struct fp_pending init = {};
	struct fp_egress *e;
	struct inner in;
	int r, why;

	mark_path(skb, 0);
	if (!c) {
		blind_now(FP_DIR_EG, now);
		return PASS;
	}
	r = inner_ip4(skb, ETH_HLEN, &in);
	if (r == NOT_IP4)
		return PASS;
	if (r) {
		count(FP_NOT_ELIGIBLE);
		return PASS;
	}
	e = trusted(c, now) ? bpf_map_lookup_elem(&fp_eg, &in.k) : 0;
	if (!e) {
		count(FP_EG_MISS);
	} else if (e->gen != c->gen) {
		count(FP_STALE);
	} else if (e->ifindex != skb->ifindex) {
		count(FP_SPOOF);
		forget_eg(&in.k, e);
	} else if (in.tcp_flags & TCP_CTRL) {
		count(FP_CONTROL);
		if (in.tcp_flags & 0x05)
			forget_eg(&in.k, e);
	} else if ((why = unusable(c, e->used_ns, e->ct, now)) != FP_CNT_MAX) {
		count(why);
		if (why == FP_IDLE)
			forget_eg(&in.k, e);
	} else if (!guard_open(&fp_pend_eg, FP_DIR_EG, &in.k, now)) {
		count(FP_GUARD_WAIT);
	} else if (in.ttl <= e->ttl_dec || in.ttl != e->ttl || (in.tos & ~ECN_CE) != (e->tos & ~ECN_CE)) {
		/* A TTL routing would expire; a TTL or DSCP other than the
		 * learned packet's, which a 'ttl/tos inherit' device copies
		 * into the outer header. */
		count(FP_NOT_ELIGIBLE);
	} else if (too_big(skb, e->nic, &in)) {
		/* The slow path would fragment the outer packet (or refuse it). */
		count(FP_NOT_ELIGIBLE);
	} else if (!eg_gso_ok(skb, e)) {
		count(FP_CSUM_AGGREGATE);
	} else if (learned_csum(e) && udp_unsummed(&in)) {
		count(FP_NOT_ELIGIBLE);
	} else {
		__u32 nic = e->nic;
		int dec = e->ttl_dec, csum = learned_csum(e);

		touch(&e->used_ns, now);
		if (encap(skb, e, &in, csum)) {
			count(FP_HELPER_FAIL);
			return TC_ACT_SHOT;
		}
		if (dec && ttl_dec(skb, INNER_IP)) {
			count(FP_HELPER_FAIL);
			return TC_ACT_SHOT;
		}
		count(FP_EG_HIT);
		return marked_fast(skb, bpf_redirect(nic, 0));
	}
	init.ifindex = skb->ifindex;
	to_slow(&fp_pend_eg, FP_DIR_EG, &in, &init, c, now, segs_of(skb));
	return PASS;
}

SEC("tc")
int fpath_nic_eg(struct __sk_buff *skb)
{
	__u64 now = now_ns();
	struct fp_config *c = config();
	struct fp_egress e = {}, *old;
	struct fp_pending *p;
	struct outer o;
	struct inner in;
	__u8 dec = 0;
	int learn, fresh;

	if (!c || !slow_recent(FP_DIR_EG, now) || came_fast(skb) || vxlan_outer(skb, c, &o, 0) ||
	    inner_ip4(skb, INNER_IP, &in))
		return PASS;
	/* Nothing in flight: one the guard gave up on. */
	p = bpf_map_lookup_elem(&fp_pend_eg, &in.k);
	if (!p || !p->inflight)
		return PASS;
	learn = trusted(c, now) && teaches(p, &in, c, &dec) && !(in.tcp_flags & TCP_CTRL);
	take(p, segs_of(skb));
	if (!learn)
		return PASS;
	if (bpf_skb_load_bytes(skb, 0, e.hdr, sizeof(e.hdr)))
		return PASS;
	e.gen = c->gen;
	e.nic = skb->ifindex;
	e.ifindex = p->ifindex;
	e.ttl_dec = dec;
	e.tos = p->tos;
	e.ttl = p->ttl;
	e.used_ns = now;
	old = bpf_map_lookup_elem(&fp_eg, &in.k);
	fresh = !old || old->gen != c->gen;
	e.ct = ct_learned(c, &in.k, fresh ? FP_CT_WAIT : old->ct);
	if (!take_eg(c, old, &e) || bpf_map_update_elem(&fp_eg, &in.k, &e, BPF_ANY))
		return PASS;
	count(FP_EG_LEARN);
	if (fresh && e.ct == FP_CT_WAIT)
		ct_ask(&in.k, FP_DIR_EG, e.gen);
	return PASS;
}
