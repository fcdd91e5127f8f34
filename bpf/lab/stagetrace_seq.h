/* SPDX-License-Identifier: GPL-2.0 */
/* stagetrace's order check at the sequence devices (seq_on): per flow, the
 * packets that arrived behind a later one, and with seq_paths the path each
 * TCP segment took over the devices before. Apart from stagetrace.c for
 * size only: it is part of that one program and included by it after its
 * parser (struct flow, load(), stat_inc(), the seq_paths setting). */
#ifndef STAGETRACE_SEQ_H
#define STAGETRACE_SEQ_H

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

#endif
