// SPDX-License-Identifier: GPL-2.0
// stagetrace: counts, per (network namespace, device, inner flow) and per
// CPU, the packets that enter a device's receive softirq. The tracepoint
// net:netif_receive_skb fires in __netif_receive_skb_core, i.e. on the CPU
// that runs the device's stage after RPS has chosen it, whether the packet
// came from a driver's NAPI poll, GRO, gro_cells or the netif_rx backlog.
//
// No vmlinux.h: the few kernel fields needed are declared in kernel.h with
// preserve_access_index, so CO-RE finds them wherever this kernel keeps them.

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;

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

// With seq_paths, each TCP segment's path over the devices before, by the
// IPv4 ID of the skb that carried it first (GRO keeps the first's header):
// on which device, CPU and when each saw it, so that a reordered segment's
// way can be set beside its predecessor's. PATH_SLOTS IDs per flow.
#define PATH_HOPS 4
#define PATH_SLOTS 1024
struct hop {
	__u64 ns;
	__u32 netns;
	__u32 ifindex;
	__u32 cpu;
	__u32 hash;      // skb->hash
	__u32 meta;      // the first 4 bytes of XDP metadata, if any
	__u16 outer_sport; // a tunnel's outer UDP source port (0: none)
	__u8 meta_len;
	__u8 tos;        // the outer IP header's (the packet's own without a tunnel)
};

struct path {
	__u32 id;
	__u32 n;
	struct hop h[PATH_HOPS];
};

struct path_key {
	struct flow flow;
	__u32 slot;
};

// The order of a flow at the sequence device. UDP: max_seq is the highest
// sequence number seen, seen and reordered count datagrams. TCP over IPv4:
// the sender numbers its packets in the order it transmits them, the IPv4
// ID (a connected socket's counter, one per segment, retransmissions
// included); max_seq is the ID expected next, extended to 64 bits, and
// seen and reordered count data segments (a GRO packet's gso_segs), so a
// segment counts as reordered only when one transmitted after it came
// first: a loss leaves a gap, not an inversion.
struct seq_val {
	__u64 max_seq;
	__u64 seen;
	__u64 reordered;
	// The flow's last packet here, and its first reordered one: what was
	// overtaken (inv_cpu), by what (inv_prev_cpu), how far (inv_behind
	// sequence numbers below the expected) and when (CLOCK_MONOTONIC).
	__u64 last_ns;
	__u64 inv_ns;
	__u64 inv_gap_ns; // since the packet before it
	__u32 last_cpu;
	__u32 inv_cpu;
	__u32 inv_prev_cpu;
	__u32 inv_behind;
	// The task each ran in: a cpumap kthread, ksoftirqd, or whatever the
	// softirq interrupted.
	char last_comm[16];
	char inv_comm[16];
	char inv_prev_comm[16];
	// TCP with seq_paths: the IDs and paths of the last packet and of the
	// first reordered one and its predecessor.
	__u32 last_id;
	__u32 inv_id;
	__u32 inv_prev_id;
	__u32 pad2;
	struct path inv_path;
	struct path inv_prev_path;
};

// seq_step records a packet of the flow v: reordered (behind sequence
// numbers below the expected one) or not.
static __always_inline void seq_step(struct seq_val *v, __u64 behind, __u64 n)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 cpu = bpf_get_smp_processor_id();

	__sync_fetch_and_add(&v->seen, n);
	if (behind) {
		if (__sync_fetch_and_add(&v->reordered, n) == 0) {
			v->inv_ns = now;
			v->inv_gap_ns = now - v->last_ns;
			v->inv_cpu = cpu;
			v->inv_prev_cpu = v->last_cpu;
			v->inv_behind = behind;
			__builtin_memcpy(v->inv_prev_comm, v->last_comm, sizeof(v->last_comm));
			bpf_get_current_comm(v->inv_comm, sizeof(v->inv_comm));
		}
	}
	v->last_ns = now;
	v->last_cpu = cpu;
	bpf_get_current_comm(v->last_comm, sizeof(v->last_comm));
}

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

// The devices where each flow's order is checked: the last before the
// receiving sockets.
struct seq_dev {
	__u32 netns;
	__u32 ifindex;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct seq_dev);
	__type(value, __u8);
} seq_devs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct path_key);
	__type(value, struct path);
} paths SEC(".maps");

// A new flow's seq_val is built here: it does not fit the BPF stack.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct seq_val);
} seq_new SEC(".maps");

// Shared across CPUs on purpose: packets of one flow on two CPUs at once is
// exactly what reordering looks like.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct flow);
	__type(value, struct seq_val);
} seqs SEC(".maps");

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

// seq_create adds flow f's entry, starting at max_seq with seen n, and
// returns 1; 0 when another CPU added it meanwhile or the map is full.
static __always_inline int seq_create(struct flow *f, __u64 max_seq, __u64 n, __u32 last_id)
{
	__u32 zero = 0;
	struct seq_val *nv = bpf_map_lookup_elem(&seq_new, &zero);
	if (!nv)
		return 0;
	__builtin_memset(nv, 0, sizeof(*nv));
	nv->max_seq = max_seq;
	nv->seen = n;
	nv->last_ns = bpf_ktime_get_ns();
	nv->last_cpu = bpf_get_smp_processor_id();
	nv->last_id = last_id;
	return bpf_map_update_elem(&seqs, f, nv, BPF_NOEXIST) == 0;
}

static __always_inline void track_seq(struct flow *f, const __u8 *buf, __u32 l4, __u32 limit)
{
	__u64 be;
	if (load(&be, sizeof(be), buf, l4 + 8, limit)) {
		stat_inc(STAT_SEQ_SHORT);
		return;
	}
	__u64 seq = bpf_be64_to_cpu(be);
	struct seq_val *v = bpf_map_lookup_elem(&seqs, f);
	if (!v) {
		if (seq_create(f, seq, 1, 0))
			return;
		v = bpf_map_lookup_elem(&seqs, f);
		if (!v)
			return;
	}
	// A racy max is fine: a loss of the race means two CPUs handled the
	// flow at once, and the next packet below the max is still counted.
	__u64 max = v->max_seq;
	seq_step(v, seq < max ? max - seq : 0, 1);
	if (seq >= max)
		v->max_seq = seq;
}

// tcp_payload is the payload length of the TCP packet whose IP header is
// at l3 and TCP header at l4, len bytes long from the network header (a
// GRO super-packet's len covers all its segments); 0 for a pure ACK, -1
// when unreadable. *seq is its sequence number.
static __always_inline int tcp_payload(const __u8 *buf, __u32 l3, __u32 l4, __u32 limit, __u32 len,
				       __u8 family, __u32 *seq)
{
	__u8 th[14];
	if (load(th, sizeof(th), buf, l4, limit))
		return -1;
	// The IP header's length, when set, bounds the packet: short frames
	// carry Ethernet padding until ip_rcv trims it. 0 (BIG TCP, jumbograms)
	// or inconsistent: trust len.
	__u32 end = len;
	__u8 b[2];
	if (family == 4) {
		if (load(b, sizeof(b), buf, l3 + 2, limit))
			return -1;
		__u32 tot = (__u32)b[0] << 8 | b[1];
		if (tot && l3 + tot < end)
			end = l3 + tot;
	} else {
		if (load(b, sizeof(b), buf, l3 + 4, limit))
			return -1;
		__u32 pl = (__u32)b[0] << 8 | b[1];
		if (pl && l3 + 40 + pl < end)
			end = l3 + 40 + pl;
	}
	__u32 hdr = l4 + (th[12] >> 4) * 4;
	*seq = (__u32)th[4] << 24 | (__u32)th[5] << 16 | (__u32)th[6] << 8 | th[7];
	return end > hdr ? end - hdr : 0;
}

// track_runs follows the TCP sequence space a CPU handles: seq and
// payload are a data packet's.
static __always_inline void track_runs(struct stage_val *v, __u32 seq, __u32 payload, __u32 segs)
{
	v->data_segs += segs;
	if (!v->tcp || v->next_seq != seq)
		v->jumps++;
	v->tcp = 1;
	v->next_seq = seq + payload;
}

// ip_id reads the IPv4 ID of the header at l3; -1 when unreadable.
static __always_inline int ip_id(const __u8 *buf, __u32 l3, __u32 limit)
{
	__u8 b[2];
	if (load(b, sizeof(b), buf, l3 + 4, limit))
		return -1;
	return (__u16)b[0] << 8 | b[1];
}

// What a hop records of the skb besides where and when.
struct hop_skb {
	__u32 hash;
	__u32 meta;
	__u16 outer_sport;
	__u8 meta_len;
	__u8 tos;
};

// track_path notes this device on the path of the flow's skb of IP ID id.
static __always_inline void track_path(struct flow *f, __u32 id, __u32 netns, __u32 ifindex, struct hop_skb *hs)
{
	struct path_key k = {.flow = *f, .slot = id & (PATH_SLOTS - 1)};
	struct path *p = bpf_map_lookup_elem(&paths, &k);
	if (!p) {
		struct path np = {.id = id};
		bpf_map_update_elem(&paths, &k, &np, BPF_ANY);
		p = bpf_map_lookup_elem(&paths, &k);
		if (!p)
			return;
	}
	if (p->id != id) {
		p->id = id;
		p->n = 0;
	}
	__u32 n = p->n;
	if (n >= PATH_HOPS)
		return;
	p->h[n & (PATH_HOPS - 1)].ns = bpf_ktime_get_ns();
	p->h[n & (PATH_HOPS - 1)].netns = netns;
	p->h[n & (PATH_HOPS - 1)].ifindex = ifindex;
	p->h[n & (PATH_HOPS - 1)].cpu = bpf_get_smp_processor_id();
	p->h[n & (PATH_HOPS - 1)].hash = hs->hash;
	p->h[n & (PATH_HOPS - 1)].meta = hs->meta;
	p->h[n & (PATH_HOPS - 1)].outer_sport = hs->outer_sport;
	p->h[n & (PATH_HOPS - 1)].meta_len = hs->meta_len;
	p->h[n & (PATH_HOPS - 1)].tos = hs->tos;
	p->n = n + 1;
}

// copy_path copies the path of the flow's skb of IP ID id into dst.
static __always_inline void copy_path(struct flow *f, __u32 id, struct path *dst)
{
	struct path_key k = {.flow = *f, .slot = id & (PATH_SLOTS - 1)};
	struct path *p = bpf_map_lookup_elem(&paths, &k);
	if (p && p->id == id)
		__builtin_memcpy(dst, p, sizeof(*p));
}

// track_ipid checks a TCP data packet's IPv4 ID (IP header at l3) against
// the ID its flow expects next (struct seq_val). IDs are 16 bits: the
// difference to the expected one, as signed, is the distance travelled,
// right while fewer than 32768 segments of the flow vanish in a row.
static __always_inline void track_ipid(struct flow *f, const __u8 *buf, __u32 l3, __u32 limit, __u32 segs)
{
	__u8 b[2];
	if (load(b, sizeof(b), buf, l3 + 4, limit)) {
		stat_inc(STAT_SEQ_SHORT);
		return;
	}
	__u16 id = (__u16)b[0] << 8 | b[1];
	struct seq_val *v = bpf_map_lookup_elem(&seqs, f);
	if (!v) {
		// From 2^32 up: an ID below the first one's stays positive.
		if (seq_create(f, (1ULL << 32) + id + segs, segs, id))
			return;
		v = bpf_map_lookup_elem(&seqs, f);
		if (!v)
			return;
	}
	__u64 next = v->max_seq;
	__s16 d = (__s16)(id - (__u16)next);
	if (d < 0 && seq_paths && v->reordered == 0) {
		v->inv_id = id;
		v->inv_prev_id = v->last_id;
		copy_path(f, id, &v->inv_path);
		copy_path(f, v->last_id, &v->inv_prev_path);
	}
	seq_step(v, d < 0 ? (__u64)(-(__s32)d) : 0, segs);
	v->last_id = id;
	if (d >= 0)
		v->max_seq = next + d + segs; // racy as track_seq's max
}

// F reads a kernel field: a plain load where the verifier knows the
// pointer's BTF type (tp_btf), a probe read otherwise (raw_tp). btf is a
// constant, so each program keeps only its own branch; the loads are
// several times cheaper than the helper calls.
#define F(p, field) (btf ? (p)->field : BPF_CORE_READ(p, field))

static __always_inline int handle(struct sk_buff *skb, const int btf)
{
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

	__u32 segs = 1;
	struct skb_shared_info *shinfo = (void *)(head + F(skb, end));
	__u16 gs = BPF_CORE_READ(shinfo, gso_segs);
	if (gs > 1)
		segs = gs;

	struct stage_val *v = bpf_map_lookup_elem(&stages, &key);
	if (!v) {
		struct stage_val nv;
		__builtin_memset(&nv, 0, sizeof(nv));
		// EEXIST: another CPU added the key meanwhile; this CPU's value
		// is there all the same.
		bpf_map_update_elem(&stages, &key, &nv, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&stages, &key);
		if (!v) {
			stat_inc(STAT_MAP_FULL);
			return 0;
		}
	}
	v->packets += segs;
	v->skbs++;
	stat_inc(STAT_COUNTED);
	int seqdev = 0;
	if (seq_on && l4 > 0) {
		struct seq_dev sd = {.netns = netns, .ifindex = key.ifindex};
		seqdev = bpf_map_lookup_elem(&seq_devs, &sd) != 0;
	}
	if (l4 > 0 && key.flow.proto == IPPROTO_TCP) {
		__u32 seq;
		int payload = tcp_payload(buf, l3, l4, limit, len, key.flow.family, &seq);
		if (payload > 0) {
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
			if (seqdev && key.flow.family == 4)
				track_ipid(&key.flow, buf, l3, limit, segs);
		}
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
	return handle((struct sk_buff *)ctx[0], 1);
}

// raw_tp: the same, for kernels whose tracepoints lack BTF.
SEC("raw_tp/netif_receive_skb")
int stage_raw(__u64 *ctx)
{
	return handle((struct sk_buff *)ctx[0], 0);
}

char LICENSE[] SEC("license") = "GPL";
