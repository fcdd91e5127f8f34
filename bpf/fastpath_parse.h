/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* The fast path's parser (fastpath.c): an IPv4 VXLAN packet's outer
 * headers and the inner IPv4 TCP or UDP flow, read with
 * bpf_skb_load_bytes so that paged data is no special case, in as few
 * loads as the alignment allows. */
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
	__u8 l4len;       /* the TCP or UDP header's length */
	__be16 tot_len;   /* the IPv4 header's */
	__be16 udp_check; /* a UDP header's checksum field (TCP: 0) */
};

/* The EtherType and the IPv4 header behind it with the first 8 bytes of
 * TCP or UDP (ports; UDP's length and checksum), in one load (a helper
 * call each costs more than the bytes): pad keeps ip 4-aligned. */
struct ip_view {
	__u8 pad[2];
	__be16 proto;
	struct iphdr4 ip;
	__be16 ports[2];
	__be16 l4w[2];
};

#define NOT_IP4 -2

/* Reads the IPv4 header at off (behind an Ethernet header): 0; NOT_IP4
 * for a packet that is not IPv4; -1 for one the fast path leaves alone
 * (not TCP/UDP, IP options, a fragment). */
static __always_inline int inner_ip4(struct __sk_buff *skb, __u32 off, struct inner *in)
{
	struct ip_view v;

	if (bpf_skb_load_bytes(skb, off - 2, &v.proto, sizeof(v) - 2) || v.proto != bpf_htons(ETH_P_IP))
		return NOT_IP4;
	if (v.ip.ver_ihl != 0x45 || (v.ip.frag_off & bpf_htons(0x3fff)))
		return -1;
	if (v.ip.protocol != PROTO_TCP && v.ip.protocol != PROTO_UDP)
		return -1;
	__builtin_memset(in, 0, sizeof(*in));
	in->k.saddr = v.ip.saddr;
	in->k.daddr = v.ip.daddr;
	in->k.sport = v.ports[0];
	in->k.dport = v.ports[1];
	in->k.proto = v.ip.protocol;
	in->tos = v.ip.tos;
	in->ttl = v.ip.ttl;
	in->tot_len = v.ip.tot_len;
	in->l4len = 8;
	if (v.ip.protocol == PROTO_UDP)
		in->udp_check = v.l4w[1];
	if (v.ip.protocol == PROTO_TCP) {
		__u8 tcp[2]; /* data offset, flags */

		if (bpf_skb_load_bytes(skb, off + 32, tcp, sizeof(tcp)))
			return -1;
		in->l4len = (tcp[0] >> 4) * 4;
		in->tcp_flags = tcp[1];
	}
	return 0;
}

/* A ones' complement sum folded to sixteen bits. */
static __always_inline __u32 fold16(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	return (sum & 0xffff) + (sum >> 16);
}

/* The folded sum of an IPv4 header without options: 0xffff where its
 * checksum is right. */
static __always_inline __u32 ip4_sum(struct iphdr4 *ip)
{
	__u16 *w = (__u16 *)ip;
	__u32 sum = 0;

#pragma clang loop unroll(full)
	for (int i = 0; i < 10; i++)
		sum += w[i];
	return fold16(sum);
}

/* What the outer headers of a VXLAN packet say. */
struct outer {
	__be32 saddr, daddr;
	__u32 vni;
	__u16 port;
	__be16 udp_check;
	__u8 tos;
	__u8 sane; /* with check: ip_rcv and udp_rcv would take the headers as they are */
};

static __always_inline int is_port(struct fp_config *c, __u16 port)
{
#pragma clang loop unroll(full)
	for (int i = 0; i < FP_PORTS; i++)
		if (i < c->nports && c->ports[i] == port)
			return 1;
	return 0;
}

/* The outer headers in one load; pad keeps ip 4-aligned. */
struct outer_view {
	__u8 pad[2];
	__u8 macs[12];
	__be16 proto;
	struct iphdr4 ip;
	struct udphdr_ udp;
	__u8 vx[8];
};

/* Would ip_rcv and udp_rcv take the outer headers of skb as they are: the
 * IP header checksum right, the IP length the packet's (longer, they trim
 * it; shorter, they drop it) and the UDP length the rest? Anything else
 * goes to the slow path, which does what the kernel does. */
static __always_inline int outer_sane(struct __sk_buff *skb, struct outer_view *v)
{
	return ip4_sum(&v->ip) == 0xffff && bpf_ntohs(v->ip.tot_len) == skb->len - ETH_HLEN &&
	       bpf_ntohs(v->udp.len) == skb->len - ETH_HLEN - 20;
}

/* Reads an IPv4 VXLAN packet's outer headers: 0, or -1 for anything else
 * (VLAN tags, IP options, fragments, other ports). The inner EtherType is
 * inner_ip4's to check. With check (a constant), also whether the kernel
 * would take them (o->sane). */
static __always_inline int vxlan_outer(struct __sk_buff *skb, struct fp_config *c, struct outer *o, int check)
{
	struct outer_view v;

	if (bpf_skb_load_bytes(skb, 0, v.macs, sizeof(v) - 2) || v.proto != bpf_htons(ETH_P_IP))
		return -1;
	if (v.ip.ver_ihl != 0x45 || (v.ip.frag_off & bpf_htons(0x3fff)) || v.ip.protocol != PROTO_UDP)
		return -1;
	if (!is_port(c, bpf_ntohs(v.udp.dest)) || !(v.vx[0] & VXLAN_FLAG_VNI))
		return -1;
	o->saddr = v.ip.saddr;
	o->daddr = v.ip.daddr;
	o->vni = (__u32)v.vx[4] << 16 | (__u32)v.vx[5] << 8 | v.vx[6];
	o->port = bpf_ntohs(v.udp.dest);
	o->udp_check = v.udp.check;
	o->tos = v.ip.tos;
	o->sane = check && outer_sane(skb, &v);
	return 0;
}

#endif
