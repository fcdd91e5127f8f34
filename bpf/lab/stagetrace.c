// SPDX-License-Identifier: GPL-2.0
// stagetrace: counts, per (network namespace, device, inner flow) and per
// CPU, the packets that enter a device's receive softirq. The tracepoint
// net:netif_receive_skb fires in __netif_receive_skb_core, i.e. on the CPU
// that runs the device's stage after RPS has chosen it, whether the packet
// came from a driver's NAPI poll, GRO, gro_cells or the netif_rx backlog.
//
// No vmlinux.h: the few kernel fields needed are declared in kernel.h with
// preserve_access_index, so CO-RE finds them wherever this kernel keeps them.

#include "types.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

enum {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};

#include "kernel.h"

// Fields only the path record reads (seq_paths), as CO-RE flavours of the
// kernel's types, so that kernel.h's users stay as they are.
struct sk_buff___path {
	__u32 hash;
	__u16 mac_header;
} __attribute__((preserve_access_index));

struct skb_shared_info___path {
	unsigned char meta_len;
} __attribute__((preserve_access_index));

// At tc ingress skb->data is the MAC header (tcx pushes mac_len back).
struct sk_buff___tc {
	__u16 mac_len;
} __attribute__((preserve_access_index));

// An aggregate that bpf_skb_adjust_room resized (a fast path's encap or
// decap) has gso_segs 0 ("recomputed" later): its segments are then its
// payload over gso_size.
struct skb_shared_info___seg {
	unsigned short gso_size;
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88A8
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define IPPROTO_HOPOPTS 0
#define IPPROTO_ROUTING 43
#define IPPROTO_FRAGMENT 44
#define IPPROTO_DSTOPTS 60
#define VXLAN_HLEN 8
#define ETH_HLEN 14
#define MAX_VXLAN_PORTS 4

// The flow of a packet: the inner 5-tuple for VXLAN, the packet's own
// otherwise. Ports are in host order; IPv4 addresses sit in the first 4
// bytes. Layout shared with Go (bpf2go generates the twin).
struct flow {
	__u8 proto;
	__u8 family; // 4 or 6
	__u16 sport;
	__u16 dport;
	__u16 pad;
	__u8 saddr[16];
	__u8 daddr[16];
};

struct stage_key {
	__u32 netns;
	__u32 ifindex;
	struct flow flow;
};

// TCP runs: per CPU, a run is a stretch of the flow's payload packets that
// this CPU handled in a row, each starting at the sequence number where the
// CPU's previous one ended. jumps counts the runs (a payload packet that
// starts elsewhere, or the CPU's first); data_segs/jumps is the mean run
// length in segments. Pure ACKs (no payload) are skipped.
struct stage_val {
	__u64 packets; // segments: a GRO super-packet counts as gso_segs
	__u64 skbs;
	__u64 data_segs; // segments of TCP packets with payload
	__u64 jumps;     // TCP payload packets not starting at next_seq
	__u32 next_seq;  // sequence number after the last TCP payload packet
	__u32 tcp;       // next_seq is set: a TCP payload packet was seen here
};

enum {
	STAT_SEEN,       // every skb the tracepoint handed us
	STAT_COUNTED,    // skbs that matched the filter and were counted
	STAT_NOT_IP,     // not IPv4/IPv6 (ARP, LLDP, ...), outside or inside VXLAN
	STAT_TRUNCATED,  // headers not in the linear area, unreadable or malformed
	STAT_MAP_FULL,   // flows that found no room in the stages map
	STAT_SEQ_SHORT,  // sequenced flow packets without 8 readable payload bytes (UDP) or IP ID (TCP)
	STAT_MAX,
};

// Set from Go before loading.
volatile const __u16 vxlan_ports[MAX_VXLAN_PORTS] = {4789, 8472};
volatile const __u16 port_min = 0; // inner sport or dport in [min, max]; 0,0: all
volatile const __u16 port_max = 0;
volatile const __u8 proto_filter = 0; // 0: TCP and UDP (and others, portless)
volatile const __u8 netns_filter_on = 0;
volatile const __u8 seq_on = 0; // seq_devs has devices: check each flow's order there (struct seq_val)
volatile const __u8 seq_paths = 0; // and record TCP segments' paths (struct path)
// The order is checked by stage_tc on the sequence devices' tc ingress, not
// at the tracepoint: a packet bpf_redirect_peer delivers enters the device
// in __netif_receive_skb_core's second round, after the tracepoint.
volatile const __u8 seq_tc = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct stage_key);
	__type(value, struct stage_val);
} stages SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u8);
} netns_filter SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

// The headers are copied once per packet into a per-CPU buffer and parsed
// there: one probe read instead of one per header. READ_LEN bytes from
// skb->data never leave the skb's head allocation (data <= end, and
// struct skb_shared_info, over 256 bytes, follows end); only the first
// headlen of them are packet bytes, and parsing never trusts more.
#define READ_LEN 256
struct scratch {
	__u8 b[READ_LEN + 64]; // slack: a masked offset plus a header stays inside
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

static __always_inline void stat_inc(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &i);
	if (v)
		(*v)++;
}

static __always_inline int is_vxlan_port(__u16 port)
{
#pragma unroll
	for (int i = 0; i < MAX_VXLAN_PORTS; i++)
		if (vxlan_ports[i] && vxlan_ports[i] == port)
			return 1;
	return 0;
}

// Copies the n (at most 64) bytes at offset off of the packet, if they lie
// within the first limit bytes.
static __always_inline int load(void *dst, __u32 n, const __u8 *buf, __u32 off, __u32 limit)
{
	if (off + n > limit)
		return -1;
	__builtin_memcpy(dst, buf + (off & (READ_LEN - 1)), n);
	return 0;
}

// parse_l3 fills f from the IP header at off (ethertype proto) and returns
// the offset of the L4 header, or 0 when there are no ports to read (a
// later fragment, another protocol), or -1 when the packet is unreadable.
static __always_inline int parse_l3(struct flow *f, const __u8 *buf, __u32 off, __u32 limit,
				    __u16 proto)
{
	if (proto == ETH_P_IP) {
		__u8 b[20];
		if (load(b, sizeof(b), buf, off, limit))
			return -1;
		__u32 ihl = (b[0] & 0x0f) * 4;
		if ((b[0] >> 4) != 4 || ihl < 20)
			return -1;
		f->family = 4;
		f->proto = b[9];
		__builtin_memcpy(f->saddr, &b[12], 4);
		__builtin_memcpy(f->daddr, &b[16], 4);
		__u16 frag = ((__u16)b[6] << 8 | b[7]) & 0x1fff;
		if (frag)
			return 0;
		return off + ihl;
	}
	if (proto == ETH_P_IPV6) {
		__u8 b[40];
		if (load(b, sizeof(b), buf, off, limit))
			return -1;
		if ((b[0] >> 4) != 6)
			return -1;
		f->family = 6;
		__builtin_memcpy(f->saddr, &b[8], 16);
		__builtin_memcpy(f->daddr, &b[24], 16);
		__u8 nh = b[6];
		off += 40;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			__u8 x[8];
			if (nh != IPPROTO_HOPOPTS && nh != IPPROTO_ROUTING && nh != IPPROTO_DSTOPTS &&
			    nh != IPPROTO_FRAGMENT)
				break;
			if (load(x, sizeof(x), buf, off, limit))
				return -1;
			if (nh == IPPROTO_FRAGMENT) {
				if (((__u16)x[2] << 8 | x[3]) & 0xfff8) {
					f->proto = x[0];
					return 0;
				}
				off += 8;
			} else {
				off += ((__u32)x[1] + 1) * 8;
			}
			nh = x[0];
		}
		f->proto = nh;
		return off;
	}
	return -1;
}

static __always_inline int read_ports(struct flow *f, const __u8 *buf, __u32 l4, __u32 limit)
{
	__u16 p[2];
	if (f->proto != IPPROTO_TCP && f->proto != IPPROTO_UDP)
		return 0;
	if (load(p, sizeof(p), buf, l4, limit))
		return -1;
	f->sport = bpf_ntohs(p[0]);
	f->dport = bpf_ntohs(p[1]);
	return 0;
}

#include "stagetrace_seq.h"

// count_stage adds a packet of segs segments to key's stage.
static __always_inline struct stage_val *count_stage(struct stage_key *key, __u32 segs)
{
	struct stage_val *v = bpf_map_lookup_elem(&stages, key);
	if (!v) {
		struct stage_val nv;
		__builtin_memset(&nv, 0, sizeof(nv));
		// EEXIST: another CPU added the key meanwhile; this CPU's value
		// is there all the same.
		bpf_map_update_elem(&stages, key, &nv, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&stages, key);
		if (!v) {
			stat_inc(STAT_MAP_FULL);
			return 0;
		}
	}
	v->packets += segs;
	v->skbs++;
	stat_inc(STAT_COUNTED);
	return v;
}

// F reads a kernel field: a plain load where the verifier knows the
// pointer's BTF type (tp_btf), a probe read otherwise (raw_tp). btf is a
// constant, so each program keeps only its own branch; the loads are
// several times cheaper than the helper calls.
#define F(p, field) (btf ? (p)->field : BPF_CORE_READ(p, field))

// handle counts skb's stage (tracepoints) or checks its order (tc: a
// sequence device's ingress, seq_tc).
static __always_inline int handle(struct sk_buff *skb, const int btf, const int tc)
{
	if (!tc)
		stat_inc(STAT_SEEN);

	struct net_device *dev = F(skb, dev);
	if (!dev)
		return 0;
	struct net *net = F(dev, nd_net.net);
	__u32 netns = F(net, ns.inum);
	if (netns_filter_on && !bpf_map_lookup_elem(&netns_filter, &netns))
		return 0;

	unsigned char *head = F(skb, head);
	unsigned char *data = F(skb, data);
	__u32 len = F(skb, len);
	__u32 data_len = F(skb, data_len);
	if (tc) {
		__u16 mac = ((struct sk_buff___tc *)skb)->mac_len;
		data += mac;
		len -= mac;
	}
	__u16 proto = bpf_ntohs(F(skb, protocol));
	// At this tracepoint eth_type_trans has pulled the MAC header: data is
	// the network header and protocol its ethertype.
	__u32 limit = len - data_len;
	if (limit > READ_LEN)
		limit = READ_LEN;
	__u32 zero = 0;
	struct scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
	if (!sc)
		return 0;
	const __u8 *buf = sc->b;
	if (bpf_probe_read_kernel(sc->b, READ_LEN, data)) {
		stat_inc(STAT_TRUNCATED);
		return 0;
	}

	struct stage_key key;
	__builtin_memset(&key, 0, sizeof(key));
	key.netns = netns;
	key.ifindex = F(dev, ifindex);

	__u32 off = 0, l3 = 0;
	struct hop_skb hs = {};
	if (proto == ETH_P_8021Q || proto == ETH_P_8021AD) {
		__be16 inner;
		if (load(&inner, 2, buf, 2, limit)) {
			stat_inc(STAT_TRUNCATED);
			return 0;
		}
		proto = bpf_ntohs(inner);
		off = 4;
		l3 = 4;
	}
	if (proto != ETH_P_IP && proto != ETH_P_IPV6) {
		stat_inc(STAT_NOT_IP);
		return 0;
	}
	int l4 = parse_l3(&key.flow, buf, off, limit, proto);
	if (l4 < 0 || (l4 > 0 && read_ports(&key.flow, buf, l4, limit))) {
		stat_inc(STAT_TRUNCATED);
		return 0;
	}
	if (l4 > 0 && key.flow.proto == IPPROTO_UDP && is_vxlan_port(key.flow.dport)) {
		__u32 eth = l4 + 8 + VXLAN_HLEN;
		__be16 et;
		if (load(&et, 2, buf, eth + 12, limit)) {
			stat_inc(STAT_TRUNCATED);
			return 0;
		}
		if (bpf_ntohs(et) != ETH_P_IP && bpf_ntohs(et) != ETH_P_IPV6) {
			stat_inc(STAT_NOT_IP); // ARP inside the tunnel, say
			return 0;
		}
		hs.outer_sport = key.flow.sport;
		__builtin_memset(&key.flow, 0, sizeof(key.flow));
		l3 = eth + ETH_HLEN;
		l4 = parse_l3(&key.flow, buf, l3, limit, bpf_ntohs(et));
		if (l4 < 0 || (l4 > 0 && read_ports(&key.flow, buf, l4, limit))) {
			stat_inc(STAT_TRUNCATED);
			return 0;
		}
	}

	if (proto_filter && key.flow.proto != proto_filter)
		return 0;
	if (port_min || port_max) {
		__u16 s = key.flow.sport, d = key.flow.dport;
		if (!((s >= port_min && s <= port_max) || (d >= port_min && d <= port_max)))
			return 0;
	}

	__u32 seq = 0;
	int payload = 0;
	if (l4 > 0 && key.flow.proto == IPPROTO_TCP)
		payload = tcp_payload(buf, l3, l4, limit, len, key.flow.family, &seq);
	__u32 segs = 1;
	struct skb_shared_info *shinfo = (void *)(head + F(skb, end));
	__u16 gs = BPF_CORE_READ(shinfo, gso_segs);
	__u16 gsz = BPF_CORE_READ((struct skb_shared_info___seg *)shinfo, gso_size);
	if (gs > 1)
		segs = gs;
	else if (gsz && payload > gsz)
		segs = ((__u32)payload + gsz - 1) / gsz;

	struct stage_val *v = tc ? 0 : count_stage(&key, segs);
	if (!tc && !v)
		return 0;
	int seqdev = 0;
	if (seq_on && l4 > 0 && (tc || !seq_tc)) {
		struct seq_dev sd = {.netns = netns, .ifindex = key.ifindex};
		seqdev = bpf_map_lookup_elem(&seq_devs, &sd) != 0;
	}
	if (l4 > 0 && key.flow.proto == IPPROTO_TCP) {
		if (payload > 0 && v) {
			track_runs(v, seq, payload, segs);
			if (seq_paths && key.flow.family == 4) {
				int id = ip_id(buf, l3, limit);
				__u8 tos;
				if (!load(&tos, 1, buf, off + 1, limit))
					hs.tos = tos;
				struct sk_buff___path *ps = (void *)skb;
				hs.hash = BPF_CORE_READ(ps, hash);
				hs.meta_len = BPF_CORE_READ((struct skb_shared_info___path *)shinfo, meta_len);
				if (hs.meta_len >= 4)
					bpf_probe_read_kernel(&hs.meta, 4, head + BPF_CORE_READ(ps, mac_header) - hs.meta_len);
				if (id >= 0)
					track_path(&key.flow, id, netns, key.ifindex, &hs);
			}
		}
		if (payload > 0 && seqdev && key.flow.family == 4)
			track_ipid(&key.flow, buf, l3, limit, segs);
	}
	if (seqdev && key.flow.proto == IPPROTO_UDP)
		track_seq(&key.flow, buf, l4, limit);
	return 0;
}

// tp_btf: the kernel hands over the skb; the attach point is chosen from
// Go (netif_receive_skb by default; the other skb tracepoints for checks).
SEC("tp_btf/netif_receive_skb")
int stage_btf(__u64 *ctx)
{
	return handle((struct sk_buff *)ctx[0], 1, 0);
}

// raw_tp: the same, for kernels whose tracepoints lack BTF.
SEC("raw_tp/netif_receive_skb")
int stage_raw(__u64 *ctx)
{
	return handle((struct sk_buff *)ctx[0], 0, 0);
}

// tc: a sequence device's ingress (tcx, Linux 6.6; the kernel context from
// Linux 6.3), which every packet delivered to the device crosses, however
// it came; it only observes.
SEC("tc")
int stage_tc(struct __sk_buff *ctx)
{
	handle((struct sk_buff *)bpf_cast_to_kern_ctx(ctx), 1, 1);
	return -1; // TC_ACT_UNSPEC, tcx's TCX_NEXT: the next program decides
}

char LICENSE[] SEC("license") = "GPL";
