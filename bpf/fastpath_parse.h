/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* The fast path's parser (fastpath.c): an IPv4 VXLAN packet's outer
 * headers and the inner IPv4 TCP or UDP flow, read with
 * bpf_skb_load_bytes so that paged data is no special case. */
#ifndef FALCON_FASTPATH_PARSE_H
#define FALCON_FASTPATH_PARSE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "fastpath.h"
#include "parse.h"

#define OUTER_LEN 50 /* outer Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8 */

/* What an inner IPv4 packet is, for the caches. */
struct inner {
	struct fp_key k;
	__u8 tos, ttl, tcp_flags;
};

/* Reads the inner IPv4 header at off: 0, or -1 for a packet the fast path
 * leaves alone (not TCP/UDP, IP options, a fragment). */
static __always_inline int inner_ip4(struct __sk_buff *skb, __u32 off, struct inner *in)
{
	struct iphdr4 ip;
	__be16 ports[2];

	if (bpf_skb_load_bytes(skb, off, &ip, sizeof(ip)))
		return -1;
	if (ip.ver_ihl != 0x45 || (ip.frag_off & bpf_htons(0x3fff)))
		return -1;
	if (ip.protocol != PROTO_TCP && ip.protocol != PROTO_UDP)
		return -1;
	if (bpf_skb_load_bytes(skb, off + 20, ports, sizeof(ports)))
		return -1;
	__builtin_memset(in, 0, sizeof(*in));
	in->k.saddr = ip.saddr;
	in->k.daddr = ip.daddr;
	in->k.sport = ports[0];
	in->k.dport = ports[1];
	in->k.proto = ip.protocol;
	in->tos = ip.tos;
	in->ttl = ip.ttl;
	if (ip.protocol == PROTO_TCP && bpf_skb_load_bytes(skb, off + 33, &in->tcp_flags, 1))
		return -1;
	return 0;
}

/* What the outer headers of a VXLAN packet say. */
struct outer {
	__be32 saddr, daddr;
	__u32 vni;
	__u16 port;
	__be16 udp_check;
};

static __always_inline int is_port(struct fp_config *c, __u16 port)
{
#pragma clang loop unroll(full)
	for (int i = 0; i < FP_PORTS; i++)
		if (i < c->nports && c->ports[i] == port)
			return 1;
	return 0;
}

/* Reads an IPv4 VXLAN packet's outer headers: 0, or -1 for anything else
 * (VLAN tags, IP options, fragments, other ports). */
static __always_inline int vxlan_outer(struct __sk_buff *skb, struct fp_config *c, struct outer *o)
{
	struct iphdr4 ip;
	struct udphdr_ udp;
	__u8 vx[8];
	__be16 proto;

	if (bpf_skb_load_bytes(skb, 12, &proto, sizeof(proto)) || proto != bpf_htons(ETH_P_IP))
		return -1;
	if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)))
		return -1;
	if (ip.ver_ihl != 0x45 || (ip.frag_off & bpf_htons(0x3fff)) || ip.protocol != PROTO_UDP)
		return -1;
	if (bpf_skb_load_bytes(skb, ETH_HLEN + 20, &udp, sizeof(udp)))
		return -1;
	if (!is_port(c, bpf_ntohs(udp.dest)))
		return -1;
	if (bpf_skb_load_bytes(skb, ETH_HLEN + 28, vx, sizeof(vx)) || !(vx[0] & VXLAN_FLAG_VNI))
		return -1;
	if (bpf_skb_load_bytes(skb, 12 + OUTER_LEN, &proto, sizeof(proto)) || proto != bpf_htons(ETH_P_IP))
		return -1;
	o->saddr = ip.saddr;
	o->daddr = ip.daddr;
	o->vni = (__u32)vx[4] << 16 | (__u32)vx[5] << 8 | vx[6];
	o->port = bpf_ntohs(udp.dest);
	o->udp_check = udp.check;
	return 0;
}

#endif
