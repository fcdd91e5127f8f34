/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* The packet parser of falcon's programs: outer Ethernet / IPv4 / IPv6 / UDP
 * and VXLAN, then the inner Ethernet / IP / TCP / UDP. The tc program
 * (falcon.c) and the XDP program (split.c) both parse through here, so a
 * flow has one identity wherever it is looked at. Every function returns 0
 * or the CNT_PASS_* reason why the packet is left alone. */
#ifndef FALCON_PARSE_H
#define FALCON_PARSE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "datapath.h"

#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88A8

#define PROTO_HOPOPTS 0
#define PROTO_TCP 6
#define PROTO_UDP 17
#define PROTO_ROUTING 43
#define PROTO_FRAGMENT 44
#define PROTO_AH 51
#define PROTO_DSTOPTS 60

#define VXLAN_HLEN 8
#define VXLAN_FLAG_VNI 0x08
#define IPV6_MAX_EXT 4

struct flow {
	__u32 src[4];
	__u32 dst[4];
	__u32 ports; /* sport << 16 | dport, host order */
	__u32 proto;
	__u32 v6;
};

struct iphdr4 {
	__u8 ver_ihl;
	__u8 tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__be16 check;
	__be32 saddr;
	__be32 daddr;
};

struct iphdr6 {
	__be32 ver_tc_fl;
	__be16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	__be32 saddr[4];
	__be32 daddr[4];
};

struct udphdr_ {
	__be16 source;
	__be16 dest;
	__be16 len;
	__be16 check;
};

/* The packet as either program sees it. xdp is a constant at each program's
 * call site, so after inlining only that program's helper is left. */
struct pkt {
	void *ctx;  /* struct __sk_buff * or struct xdp_md * */
	void *data;
	void *end;
	__u32 len;  /* the whole packet, paged data included; for kmem the linear part */
	__u32 xdp;
	__u32 kmem; /* data is kernel memory seen from a tracing program (guard.c) */
};

/* Headers deeper than this are read with the load-bytes helpers only; it
 * keeps the offsets the verifier sees bounded. */
#define MAX_DIRECT_OFF 256

/* Copies len bytes at off into dst: straight from the linear data when they
 * are there (the usual case: GRO pulled every header it parsed, inner ones
 * included; an XDP buffer is all linear), else through
 * bpf_skb_load_bytes() / bpf_xdp_load_bytes(), which also read paged data.
 * Packet loads may be unaligned on the targets falcon runs on; the
 * alignment hint only lets clang copy in words rather than bytes. */
static __always_inline int load(struct pkt *p, __u32 off, void *dst, __u32 len)
{
	void *q;

	if (p->kmem) {
		if (off > p->len || len > p->len - off)
			return -1;
		return bpf_probe_read_kernel(dst, len, p->data + off);
	}
	if (off <= MAX_DIRECT_OFF) {
		q = p->data + off;
		if (q + len <= p->end) {
			__builtin_memcpy(dst, __builtin_assume_aligned(q, 2), len);
			return 0;
		}
	}
	if (p->xdp)
		return bpf_xdp_load_bytes(p->ctx, off, dst, len);
	return bpf_skb_load_bytes(p->ctx, off, dst, len);
}

/* *off moves past the Ethernet header and at most one VLAN tag (tc usually
 * sees tags already moved to skb metadata). */
static __always_inline int parse_eth(struct pkt *p, __u32 *off, __u16 *proto)
{
	__be16 t;

	if (load(p, *off + 12, &t, sizeof(t)))
		return CNT_PASS_TRUNCATED;
	*off += ETH_HLEN;
	*proto = bpf_ntohs(t);
	if (*proto == ETH_P_8021Q || *proto == ETH_P_8021AD) {
		if (load(p, *off + 2, &t, sizeof(t)))
			return CNT_PASS_TRUNCATED;
		*off += 4;
		*proto = bpf_ntohs(t);
	}
	if (*proto != ETH_P_IP && *proto != ETH_P_IPV6)
		return CNT_PASS_NON_IP;
	return 0;
}

static __always_inline int parse_ip4(struct pkt *p, __u32 *off, struct flow *fl)
{
	struct iphdr4 ip;
	__u32 ihl;

	if (load(p, *off, &ip, sizeof(ip)))
		return CNT_PASS_TRUNCATED;
	if ((ip.ver_ihl >> 4) != 4)
		return CNT_PASS_MALFORMED;
	ihl = (ip.ver_ihl & 0x0f) * 4;
	if (ihl < sizeof(ip))
		return CNT_PASS_MALFORMED;
	/* Any fragment, the first included: later ones carry no ports, and a
	 * flow must take one path. */
	if (bpf_ntohs(ip.frag_off) & 0x3fff)
		return CNT_PASS_FRAGMENT;
	if (*off + ihl > p->len)
		return CNT_PASS_TRUNCATED;
	fl->src[0] = bpf_ntohl(ip.saddr);
	fl->dst[0] = bpf_ntohl(ip.daddr);
	fl->proto = ip.protocol;
	fl->v6 = 0;
	*off += ihl;
	return 0;
}

static __always_inline int parse_ip6(struct pkt *p, __u32 *off, struct flow *fl)
{
	struct iphdr6 ip;
	__u8 ext[2];
	__u32 nh;
	int i;

	if (load(p, *off, &ip, sizeof(ip)))
		return CNT_PASS_TRUNCATED;
	if ((bpf_ntohl(ip.ver_tc_fl) >> 28) != 6)
		return CNT_PASS_MALFORMED;
	*off += sizeof(ip);
	nh = ip.nexthdr;
#pragma unroll
	for (i = 0; i < IPV6_MAX_EXT; i++) {
		if (nh == PROTO_FRAGMENT)
			return CNT_PASS_FRAGMENT;
		if (nh != PROTO_HOPOPTS && nh != PROTO_ROUTING && nh != PROTO_DSTOPTS && nh != PROTO_AH)
			break;
		if (load(p, *off, ext, sizeof(ext)))
			return CNT_PASS_TRUNCATED;
		*off += nh == PROTO_AH ? ((__u32)ext[1] + 2) * 4 : ((__u32)ext[1] + 1) * 8;
		nh = ext[0];
	}
	if (nh == PROTO_FRAGMENT)
		return CNT_PASS_FRAGMENT;
	if (nh == PROTO_HOPOPTS || nh == PROTO_ROUTING || nh == PROTO_DSTOPTS || nh == PROTO_AH)
		return CNT_PASS_MALFORMED;
	if (*off > p->len)
		return CNT_PASS_TRUNCATED;
#pragma unroll
	for (i = 0; i < 4; i++) {
		fl->src[i] = bpf_ntohl(ip.saddr[i]);
		fl->dst[i] = bpf_ntohl(ip.daddr[i]);
	}
	fl->proto = nh;
	fl->v6 = 1;
	return 0;
}

static __always_inline int parse_l3(struct pkt *p, __u32 *off, __u16 proto, struct flow *fl)
{
	if (proto == ETH_P_IP)
		return parse_ip4(p, off, fl);
	return parse_ip6(p, off, fl);
}

/* Ports of TCP and UDP; other IP protocols are one flow per address pair. */
static __always_inline int parse_l4(struct pkt *p, __u32 off, struct flow *fl)
{
	__be16 ports[2];
	__u32 need;

	if (fl->proto == PROTO_TCP)
		need = 20;
	else if (fl->proto == PROTO_UDP)
		need = 8;
	else
		return 0;
	if (off + need > p->len)
		return CNT_PASS_TRUNCATED;
	if (load(p, off, ports, sizeof(ports)))
		return CNT_PASS_TRUNCATED;
	fl->ports = (__u32)bpf_ntohs(ports[0]) << 16 | bpf_ntohs(ports[1]);
	return 0;
}

static __always_inline int vxlan_port(struct config *cfg, __u16 port)
{
	int i;

#pragma unroll
	for (i = 0; i < MAX_PORTS; i++)
		if (i < cfg->nports && cfg->ports[i] == port)
			return 1;
	return 0;
}

/* Past the outer IP/UDP and the VXLAN header, *off being the outer network
 * header of ethertype proto: *off is the inner frame. */
static __always_inline int parse_outer(struct pkt *p, struct config *cfg, __u32 *off, __u16 proto)
{
	struct flow outer = {};
	struct udphdr_ udp;
	__u8 vx[VXLAN_HLEN];
	int r;

	r = parse_l3(p, off, proto, &outer);
	if (r)
		return r;
	if (outer.proto != PROTO_UDP)
		return CNT_PASS_NOT_VXLAN;
	if (load(p, *off, &udp, sizeof(udp)))
		return CNT_PASS_TRUNCATED;
	if (!vxlan_port(cfg, bpf_ntohs(udp.dest)))
		return CNT_PASS_NOT_VXLAN;
	*off += sizeof(udp);
	if (load(p, *off, vx, sizeof(vx)))
		return CNT_PASS_TRUNCATED;
	if (!(vx[0] & VXLAN_FLAG_VNI))
		return CNT_PASS_MALFORMED;
	*off += VXLAN_HLEN;
	return 0;
}

/* The inner flow from a network header of ethertype proto at off; at a NIC
 * (encap set) past the outer headers first. Tracing programs start here:
 * the kernel has pulled the MAC header by the time they see a packet. */
static __always_inline int parse_l3_up(struct pkt *p, int encap, struct config *cfg, __u32 off, __u16 proto,
				       struct flow *fl)
{
	int r;

	if (proto != ETH_P_IP && proto != ETH_P_IPV6)
		return CNT_PASS_NON_IP;
	if (encap) {
		r = parse_outer(p, cfg, &off, proto);
		if (r)
			return r;
		r = parse_eth(p, &off, &proto);
		if (r)
			return r;
	}
	r = parse_l3(p, &off, proto, fl);
	if (r)
		return r;
	return parse_l4(p, off, fl);
}

/* The inner flow of a frame that starts with its Ethernet header. */
static __always_inline int parse(struct pkt *p, int encap, struct config *cfg, struct flow *fl)
{
	__u32 off = 0;
	__u16 proto;
	int r;

	r = parse_eth(p, &off, &proto);
	if (r)
		return r;
	return parse_l3_up(p, encap, cfg, off, proto, fl);
}

#endif
