/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* Aggregates on the fast path (docs/fastpath.md, "TCP aggregates at
 * ingress"). Included by fastpath.c after its maps. */
#ifndef FALCON_FASTPATH_GSO_H
#define FALCON_FASTPATH_GSO_H

#define FP_WHOLE_ADDRS 4

/* Which TCP aggregates the container behind a host-side veth (the map's
 * key, its ifindex) takes whole. An aggregate decapsulated in tc keeps its
 * tunnel GSO bit: harmless to a local socket, wrong if the container
 * forwards it (cut into segments by that bit, or encapsulated again). A
 * container forwards nothing if its namespace forwards IPv4 on no device
 * (any); else only a packet to one of its own addresses is sure to stay in
 * it, when nothing there rewrites destinations before routing (the agent
 * lists them only then, and looks each second). */
struct fp_whole_rule {
	__u32 any;
	__u32 n;                     /* addresses in addr */
	__be32 addr[FP_WHOLE_ADDRS]; /* the namespace's own IPv4 addresses */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct fp_whole_rule);
} fp_whole SEC(".maps");

/* How many packets an skb is: a GRO or GSO aggregate counts its segments,
 * so that what the guard counts in and out agrees whether the slow path
 * delivers an aggregate whole, merged with another (GRO in the VXLAN
 * device's cells) or cut into its segments. */
static __always_inline __u32 segs_of(struct __sk_buff *skb)
{
	return skb->gso_segs > 1 ? skb->gso_segs : 1;
}

/* May the fast path decapsulate skb, of flow in, for entry e? Any packet
 * that is not an aggregate; of aggregates only TCP's
 * (bpf_skb_adjust_room decapsulates no other GSO type), and only where
 * the container takes them whole (fp_whole). */
static __always_inline int whole_ok(struct __sk_buff *skb, struct inner *in, struct fp_ingress *e)
{
	struct fp_whole_rule *w;

	if (skb->gso_segs <= 1 && !skb->gso_size)
		return 1;
	w = in->k.proto == PROTO_TCP ? bpf_map_lookup_elem(&fp_whole, &e->ifindex) : 0;
	if (!w)
		return 0;
	if (w->any)
		return 1;
#pragma clang loop unroll(full)
	for (int i = 0; i < FP_WHOLE_ADDRS; i++)
		if (i < w->n && w->addr[i] == in->k.daddr)
			return 1;
	return 0;
}

/* Would the packet, encapsulated, exceed the NIC's MTU? A GSO packet is
 * judged by its segments (the helper passes any GSO packet, and cannot
 * count the outer headers in a segment): each is the inner IP and L4
 * headers and gso_size of payload. */
static __always_inline int too_big(struct __sk_buff *skb, __u32 nic, struct inner *in)
{
	__u32 mtu = 0;
	__u32 seg = skb->gso_size;

	if (!seg)
		return bpf_check_mtu(skb, nic, &mtu, OUTER_LEN, 0) != 0;
	bpf_check_mtu(skb, nic, &mtu, 0, 0); /* the NIC's MTU, whatever it returns */
	return OUTER_LEN - ETH_HLEN + 20 + in->l4len + seg > mtu;
}

/* Did the slow path send the learned packet with an outer UDP checksum
 * (the VXLAN device's udpcsum, on by default)? A receiver's GRO merges
 * only packets that agree on having one (udp_gro_receive), so fast packets
 * without one and slow packets with one are two flows there, each held on
 * its own: at a switch between the paths a held aggregate of one was
 * delivered after the other's that followed it (calico, one TCP flow under
 * cache flushes: 1-45 segments in one run in five). So the fast path sends
 * what the slow path would. */
static __always_inline int learned_csum(struct fp_egress *e)
{
	return e->hdr[ETH_HLEN + 20 + 6] | e->hdr[ETH_HLEN + 20 + 7];
}

/* May an egress packet take the fast path? An aggregate only where the
 * slow path sends no outer checksum: bpf_skb_adjust_room marks it a tunnel
 * without one (SKB_GSO_UDP_TUNNEL), so its segments could carry none. */
static __always_inline int eg_gso_ok(struct __sk_buff *skb, struct fp_egress *e)
{
	return (skb->gso_segs <= 1 && !skb->gso_size) || !learned_csum(e);
}

/* Was an inner UDP packet sent without a checksum (zero)? outer_check's
 * rule does not hold for it. */
static __always_inline int udp_unsummed(struct inner *in)
{
	return in->k.proto == PROTO_UDP && !in->udp_check;
}

/* The outer UDP checksum of a packet about to be encapsulated with hdr
 * (its UDP length set, its check 0), without summing its payload, by local
 * checksum offload's rule (lco_csum): an inner L4 packet whose own checksum
 * is right sums to the complement of its pseudo header, whether the kernel
 * completes that checksum later (CHECKSUM_PARTIAL) or it is complete
 * already; the inner IPv4 header (no options: inner_ip4), whose checksum
 * is right before and after a TTL change, sums to zero. What is left is
 * the outer pseudo header, the outer UDP and VXLAN headers and the inner
 * Ethernet one, all in hdr: sixteen-bit words added on the stack, no
 * helper call. */
static __always_inline __be16 outer_check(__u8 *hdr, struct inner *in)
{
	__u16 *w = (__u16 *)(hdr + ETH_HLEN + 12); /* outer saddr, daddr */
	__u16 *u = (__u16 *)(hdr + ETH_HLEN + 20); /* UDP, VXLAN, inner Ethernet */
	__u32 sum = bpf_htons(PROTO_UDP) + u[2], pin;
	__u16 check;

#pragma clang loop unroll(full)
	for (int i = 0; i < 4; i++)
		sum += w[i];
#pragma clang loop unroll(full)
	for (int i = 0; i < (FP_HDR - ETH_HLEN - 20) / 2; i++)
		sum += u[i];
	pin = (in->k.saddr & 0xffff) + (in->k.saddr >> 16) + (in->k.daddr & 0xffff) + (in->k.daddr >> 16) +
	      bpf_htons(in->k.proto) + bpf_htons(bpf_ntohs(in->tot_len) - 20);
	sum += ~fold16(pin) & 0xffff;
	check = ~fold16(sum);
	return check ? check : 0xffff;
}

#endif
