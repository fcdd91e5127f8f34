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

#endif
