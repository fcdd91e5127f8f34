// SPDX-License-Identifier: GPL-2.0
// stagecost: the NET_RX softirq time each device's receive stage costs, per
// (network namespace, device) and CPU. A per-CPU state machine cuts every
// NET_RX softirq into intervals between consecutive events and charges each
// interval to whoever owns it:
//
//   irq:softirq_entry (NET_RX)  the softirq starts; nothing owns the time yet.
//   net:netif_receive_skb       the time since the last event goes to the
//                               device of the previous skb (or is held as
//                               pending); from now on this skb's device owns
//                               it: its IP, UDP/TCP, VXLAN decapsulation,
//                               bridge and veth forwarding all run until the
//                               next event.
//   net:napi_gro_receive_entry  a NAPI of another device starts GRO work: the
//                               previous skb's device stops owning the time
//                               (see below).
//   napi:napi_poll              one poll ended: the time since the last event
//                               goes to the owner or to pending, and pending
//                               (the poll's work before its first delivered
//                               skb: driver, veth skb building, GRO) goes to
//                               the polled device, or to the backlog key for
//                               a CPU's backlog (napi->dev NULL).
//   irq:softirq_exit (NET_RX)   the rest (pending, net_rx_action's own work,
//                               RPS IPIs) goes to the owner or to "other".
//
// Each interval is charged once, so a CPU's charges never add up to more
// than its NET_RX softirq time. The BPF programs' own cost lands in the
// stage they interrupt.
//
// Why the GRO boundary: when a poll uses its whole budget, the kernel
// flushes GRO after the napi_poll tracepoint, so skbs of the polled device
// are delivered after its poll "ended" and own the time until the next
// event. Without a boundary, the next NAPI's GRO work (the VXLAN device's
// gro_cells) would be charged to the previous device (the NIC).
//
// Outside a NET_RX softirq (threaded NAPI, the cpumap kthread of XDP
// redirects, busy polling) skbs are counted but their time is charged to
// nothing: no event marks where such a kthread's work starts, and the gap
// between two of its events may include sleeping or other tasks. They are
// counted in untimed_segs, so ns/segment can leave them out.
//
// No vmlinux.h: kernel.h declares the few fields used, CO-RE relocates them.

#include "types.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

enum {
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_NOEXIST = 1,
};

#include "kernel.h"

#define NET_RX_SOFTIRQ 3
// Keys of time that belongs to no device. netns 0 is never a namespace's
// inode.
#define IFINDEX_BACKLOG 0
#define IFINDEX_OTHER 0xffffffff

struct cost_key {
	__u32 netns;
	__u32 ifindex;
};

struct cost_val {
	__u64 ns;
	__u64 skbs;
	__u64 segs;         // a GRO super-packet counts as gso_segs
	__u64 untimed_segs; // segs seen outside a NET_RX softirq
};

struct cpu_state {
	__u64 ts;      // the last event
	__u64 pending; // time of the current poll before its first skb
	struct cost_key cur;
	__u8 in_rx;
	__u8 has_cur;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct cost_key);
	__type(value, struct cost_val);
} costs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_state);
} state SEC(".maps");

// Charges that found no room in costs (ns and segs lost), per CPU.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

static __always_inline struct cpu_state *get_state(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&state, &zero);
}

static __always_inline void add(struct cost_key *k, __u64 ns, __u64 skbs, __u64 segs, __u64 untimed)
{
	struct cost_val *v = bpf_map_lookup_elem(&costs, k);
	if (!v) {
		struct cost_val nv = {};
		// EEXIST: an earlier program on this CPU won the race; use its entry.
		bpf_map_update_elem(&costs, k, &nv, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&costs, k);
		if (!v) {
			__u32 zero = 0;
			__u64 *l = bpf_map_lookup_elem(&lost, &zero);
			if (l)
				(*l)++;
			return;
		}
	}
	v->ns += ns;
	v->skbs += skbs;
	v->segs += segs;
	v->untimed_segs += untimed;
}

static __always_inline void dev_key(struct cost_key *k, struct net_device *dev)
{
	k->netns = dev->nd_net.net->ns.inum;
	k->ifindex = dev->ifindex;
}

// elapsed closes the interval since the last event: the owner gets it, or
// it waits in pending for the poll's device.
static __always_inline void elapsed(struct cpu_state *st, __u64 now)
{
	__u64 d = now - st->ts;
	if (st->has_cur)
		add(&st->cur, d, 0, 0, 0);
	else
		st->pending += d;
	st->ts = now;
}

SEC("tp_btf/softirq_entry")
int cost_softirq_entry(__u64 *ctx)
{
	if ((__u32)ctx[0] != NET_RX_SOFTIRQ)
		return 0;
	struct cpu_state *st = get_state();
	if (!st)
		return 0;
	st->in_rx = 1;
	st->has_cur = 0;
	st->pending = 0;
	st->ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/netif_receive_skb")
int cost_receive(__u64 *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[0];
	struct net_device *dev = skb->dev;
	if (!dev)
		return 0;
	struct cost_key k;
	dev_key(&k, dev);
	// A probe read: skb->head is a plain scalar to older verifiers (6.1;
	// 6.18 makes it untrusted memory), which refuse a direct load from it.
	struct skb_shared_info *shinfo = (void *)(skb->head + skb->end);
	__u64 segs = 1;
	__u16 gs = BPF_CORE_READ(shinfo, gso_segs);
	if (gs > 1)
		segs = gs;

	struct cpu_state *st = get_state();
	if (!st)
		return 0;
	if (!st->in_rx) {
		add(&k, 0, 1, segs, segs);
		return 0;
	}
	__u64 now = bpf_ktime_get_ns();
	if (st->has_cur && st->cur.netns == k.netns && st->cur.ifindex == k.ifindex) {
		// The common case, one map update.
		add(&k, now - st->ts, 1, segs, 0);
		st->ts = now;
		return 0;
	}
	elapsed(st, now);
	add(&k, 0, 1, segs, 0);
	st->cur = k;
	st->has_cur = 1;
	return 0;
}

SEC("tp_btf/napi_gro_receive_entry")
int cost_gro(__u64 *ctx)
{
	struct cpu_state *st = get_state();
	if (!st || !st->in_rx || !st->has_cur)
		return 0;
	struct sk_buff *skb = (struct sk_buff *)ctx[0];
	struct net_device *dev = skb->dev;
	if (!dev)
		return 0;
	struct cost_key k;
	dev_key(&k, dev);
	if (k.netns == st->cur.netns && k.ifindex == st->cur.ifindex)
		return 0;
	elapsed(st, bpf_ktime_get_ns());
	st->has_cur = 0;
	return 0;
}

SEC("tp_btf/napi_poll")
int cost_napi_poll(__u64 *ctx)
{
	struct cpu_state *st = get_state();
	if (!st || !st->in_rx)
		return 0;
	elapsed(st, bpf_ktime_get_ns());
	if (st->pending) {
		struct napi_struct *napi = (struct napi_struct *)ctx[0];
		struct net_device *dev = napi->dev;
		struct cost_key k = {.netns = 0, .ifindex = IFINDEX_BACKLOG};
		if (dev)
			dev_key(&k, dev);
		add(&k, st->pending, 0, 0, 0);
	}
	st->has_cur = 0;
	st->pending = 0;
	return 0;
}

SEC("tp_btf/softirq_exit")
int cost_softirq_exit(__u64 *ctx)
{
	if ((__u32)ctx[0] != NET_RX_SOFTIRQ)
		return 0;
	struct cpu_state *st = get_state();
	if (!st || !st->in_rx)
		return 0;
	elapsed(st, bpf_ktime_get_ns());
	if (st->pending) {
		struct cost_key k = {.netns = 0, .ifindex = IFINDEX_OTHER};
		add(&k, st->pending, 0, 0, 0);
	}
	st->in_rx = 0;
	st->has_cur = 0;
	st->pending = 0;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
