/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* Aggregates on the fast path (docs/fastpath.md, "TCP aggregates at
 * ingress"). Included by fastpath.c after its maps. */
#ifndef FALCON_FASTPATH_GSO_H
#define FALCON_FASTPATH_GSO_H

/* Host-side veths (by ifindex) whose containers take a TCP aggregate
 * whole: their namespace does not forward IPv4 (the agent looks each
 * second), so an aggregate decapsulated in tc, which keeps its tunnel GSO
 * bit, reaches a socket and is never cut into segments again. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
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
 * (bpf_skb_adjust_room decapsulates no other GSO type), and only for a
 * container that takes them whole. */
static __always_inline int whole_ok(struct __sk_buff *skb, struct inner *in, struct fp_ingress *e)
{
	if (skb->gso_segs <= 1 && !skb->gso_size)
		return 1;
	return in->k.proto == PROTO_TCP && bpf_map_lookup_elem(&fp_whole, &e->ifindex);
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

/* Was an inner UDP packet sent without a checksum (zero)? outer_csum's rule
 * does not hold for it. Before encapsulation: the inner IPv4 header has no
 * options (inner_ip4). */
static __always_inline int udp_unsummed(struct __sk_buff *skb, struct inner *in)
{
	__u16 check = 1;

	return in->k.proto == PROTO_UDP && !bpf_skb_load_bytes(skb, ETH_HLEN + 20 + 6, &check, sizeof(check)) && !check;
}

#define CSUM_SPAN 52 /* outer UDP, VXLAN, inner Ethernet and IPv4 (50), padded */

/* Sets the outer UDP checksum of a packet just encapsulated (its check 0)
 * without summing its payload, by local checksum offload's rule
 * (lco_csum): an inner L4 packet whose own checksum is right sums to the
 * complement of its pseudo header, whether the kernel completes that
 * checksum later (CHECKSUM_PARTIAL) or it is complete already. */
static __always_inline int outer_csum(struct __sk_buff *skb)
{
	__u8 b[CSUM_SPAN];
	struct {
		__be32 saddr, daddr;
		__u8 zero, proto;
		__be16 len;
	} ph = {};
	__u64 sum, in;
	__u16 check;

	if (bpf_skb_load_bytes(skb, ETH_HLEN + 12, &ph, 8) || bpf_skb_load_bytes(skb, ETH_HLEN + 20, b, CSUM_SPAN))
		return -1;
	ph.proto = PROTO_UDP;
	ph.len = bpf_htons(skb->len - ETH_HLEN - 20);
	sum = bpf_csum_diff(0, 0, (__be32 *)&ph, sizeof(ph), 0);
	/* The inner pseudo header: its addresses, protocol and L4 length. */
	__builtin_memcpy(&ph, b + 30 + 12, 8);
	ph.proto = b[30 + 9];
	ph.len = bpf_htons(((__u16)b[30 + 2] << 8 | b[30 + 3]) - 20);
	in = bpf_csum_diff(0, 0, (__be32 *)&ph, sizeof(ph), 0);
	in = (in & 0xffff) + (in >> 16);
	in = (in & 0xffff) + (in >> 16);
	b[50] = b[51] = 0;
	sum += bpf_csum_diff(0, 0, (__be32 *)b, CSUM_SPAN, 0) + (~in & 0xffff);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	check = ~sum;
	if (!check)
		check = 0xffff;
	return bpf_skb_store_bytes(skb, ETH_HLEN + 20 + 6, &check, sizeof(check), 0);
}

#endif
