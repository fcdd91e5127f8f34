// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/* falcon guard: the receiving half of the ordering guard (guard.h).
 *
 * Every hook counts, per (flow, hook), the segments it passes on; this
 * program counts, per flow, the segments that the last stage has finished
 * with. A segment reaching a container's end is seen by falcon_arrive, a
 * tc program on that device's ingress (at a host NIC, where the host's own
 * sockets come next, falcon_at_nic), on the CPU that runs that stage once
 * the packet has left every queue behind it. (The net:netif_receive_skb
 * tracepoint was the first counting point: on the CPU that RPS sends a
 * stage to, it did not fire for 0.1-0.3 % of the skbs the kernel processed
 * there, while tc ingress saw every one; docs/ordering-guard.md.) The stack still
 * has the segment until the socket has it, and a moved segment taking the
 * short way through another CPU could overtake it there while this CPU is
 * stalled (an interrupt, a preempted vCPU). So it is only noted as pending
 * on this CPU, and counted once the stack is done with it: when this CPU's
 * next arrival comes, or when the NAPI poll that delivered it returns
 * (napi:napi_poll). Packets dropped on the way count at once, since they
 * will never arrive: any drop (skb:kfree_skb) at a device on the way (a
 * STAGE_PATH device: the gro_cells queue, the backlog, the stack behind
 * it), and at the last stage only a backlog's (reason CPU_BACKLOG): later
 * drops there come after the arrival was noted. Counts are per CPU, so no
 * cache line moves between the stage CPUs; a hook that wants to move a flow
 * sums them and compares with what it sent. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "datapath.h"
#include "maps.h"
#include "parse.h"
#include "guard.h"
#include "kernel.h"

enum skb_drop_reason {
	SKB_DROP_REASON_CPU_BACKLOG = 0,
};

enum event {
	DROPPED = 1,
	DROPPED_BACKLOG = 2, /* refused by a full backlog: never reached the stage */
};

/* The segments that reached a last stage on this CPU and are still on their
 * way up the stack. At a container's end one at a time: counted when this
 * CPU's next arrival comes (the backlog hands the stack one skb at a time,
 * to the socket, before the next) or when the NAPI poll that carried it
 * returns, whichever comes first. At a host NIC (falcon_at_nic) the stack
 * takes skbs in lists: GRO hands up to net.core.gro_normal_batch of them
 * (8 by default) through tc one after another before any reaches IP, so
 * there they wait together for the poll's return, or for the cpumap
 * kthread's next batch (falcon_guard_kthread): the kthread delivers each
 * batch before it takes the next. A list longer than PENDING_MAX counts its
 * oldest early. */
#define PENDING_MAX 64 /* a power of two: indexes are masked with it */

struct pend {
	__u32 fh;
	__u32 segs;
	__u32 marks; /* MARK_* of the current epoch ... */
	__u32 epoch; /* ... which this was: a comeback forgets every count */
};

struct pending {
	__u32 n;
	__u32 pad;
	struct pend e[PENDING_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pending);
} falcon_pending SEC(".maps");

/* Counts the pending segments, if any, and returns the slot (NULL only if
 * the map is missing). An arrival outside any NAPI poll (a driver that
 * delivers from process context) waits for this CPU's next arrival or
 * poll, and its flow for the guard timeout at worst: late, never early. */
static __always_inline struct pending *flush_pending(void)
{
	__u32 zero = 0, i, n;
	struct pending *p = bpf_map_lookup_elem(&falcon_pending, &zero);

	if (!p || !p->n)
		return p;
	/* An arrival noted before a stand-down is flushed at the first
	 * arrival or poll after the comeback, into counts that started
	 * afresh: counted there, it would let its flow move one segment
	 * early. (The configuration is looked up only then: this runs at
	 * every NAPI poll.) */
	struct config *cfg = bpf_map_lookup_elem(&falcon_config, &zero);

	n = p->n;
	p->n = 0;
	if (!cfg)
		return p;
	for (i = 0; i < PENDING_MAX; i++) {
		if (i >= n)
			break;
		struct pend *e = &p->e[i & (PENDING_MAX - 1)];

		if (e->epoch == cfg->epoch)
			add_done(e->fh, e->segs, e->marks);
	}
	return p;
}

static __always_inline int count_done(struct sk_buff *skb, int ev)
{
	struct net_device *dev = skb->dev;
	struct stage_dev sd = {};
	struct config *cfg;
	struct flow fl = {};
	__u32 zero = 0, *kind, segs = 1;
	__u16 gs;

	if (!dev)
		return 0;
	sd.netns_ino = dev->nd_net.net->ns.inum;
	sd.ifindex = dev->ifindex;
	kind = bpf_map_lookup_elem(&falcon_stages, &sd);
	if (!kind)
		return 0;
	if (*kind == STAGE_LAST && ev == DROPPED)
		return 0;
	cfg = bpf_map_lookup_elem(&falcon_config, &zero);
	if (!cfg)
		return 0;

	/* A drop may come after the network layer pulled its own header:
	 * the network header offset says where the packet starts. */
	unsigned char *l3 = skb->head + skb->network_header;
	__u32 linear = skb->len - skb->data_len;

	if (l3 > skb->data || skb->data - l3 > 128)
		return 0;
	linear += skb->data - l3;
	struct pkt p = {
		.ctx = skb,
		.data = l3,
		.len = linear,
		.kmem = 1,
	};
	if (parse_l3_up(&p, 0, cfg, 0, bpf_ntohs(skb->protocol), &fl))
		return 0;

	gs = BPF_CORE_READ((struct skb_shared_info *)(skb->head + skb->end), gso_segs);
	if (gs > 1)
		segs = gs;
	__u32 mark = bpf_core_field_exists(skb->tc_index) ? BPF_CORE_READ(skb, tc_index) : 0;

	add_done(flow_hash(&fl), segs, current_marks(cfg, mark));
	return 0;
}

/* Notes an arrival at a last stage as pending, with the hooks' marks: in
 * tc_index at a container's end, where the tc hooks put them; at a host NIC
 * (nic) in the metadata the split program wrote into the frame, since no tc
 * hook runs before this one there. At a container's end the arrival before
 * it is counted first (flush_pending says why only there). Passes every
 * packet on, its tc_index cleared of falcon's mark. */
static __always_inline int arrive(struct __sk_buff *skb, int nic)
{
	struct pkt p = {
		.ctx = skb,
		.data = (void *)(long)skb->data,
		.end = (void *)(long)skb->data_end,
		.len = skb->len,
	};
	struct pending *pd;
	struct pend *e;
	struct config *cfg;
	struct flow fl = {};
	__u32 zero = 0, mark = skb->tc_index, i, fh, segs, marks;

	if (nic) {
		__u32 *meta = (void *)(long)skb->data_meta;

		mark = 0;
		if ((void *)(meta + 1) <= (void *)(long)skb->data)
			mark = *meta;
		pd = bpf_map_lookup_elem(&falcon_pending, &zero);
		if (pd && pd->n >= PENDING_MAX)
			pd = flush_pending();
	} else {
		pd = flush_pending();
		if ((mark & MARK_SIG_MASK) == MARK_SIG)
			skb->tc_index = 0;
	}
	cfg = bpf_map_lookup_elem(&falcon_config, &zero);
	if (!pd || !cfg || parse(&p, 0, cfg, &fl))
		return TC_ACT_UNSPEC;
	fh = flow_hash(&fl);
	segs = skb->gso_segs > 1 ? skb->gso_segs : 1;
	marks = current_marks(cfg, mark);
	/* n < PENDING_MAX here (a full list was flushed above). The mask,
	 * not a comparison, says so to the verifier: after a comparison the
	 * compiler kept an unchecked copy of n on the stack, and 6.1's
	 * verifier refused the store ("unbounded memory access"). */
	i = pd->n & (PENDING_MAX - 1);
	e = &pd->e[i];
	e->fh = fh;
	e->segs = segs;
	e->marks = marks;
	e->epoch = cfg->epoch;
	pd->n = i + 1;
	return TC_ACT_UNSPEC;
}

/* tc ingress of every container's end (a STAGE_LAST device). */
SEC("tc")
int falcon_arrive(struct __sk_buff *skb)
{
	return arrive(skb, 0);
}

/* tc ingress of a host NIC whose stage is split (a STAGE_LAST device): the
 * host network's own sockets come after it (FALCON's Host+). */
SEC("tc")
int falcon_at_nic(struct __sk_buff *skb)
{
	return arrive(skb, 1);
}

/* A poll of a split NIC returned: GRO has let go of what the poll brought,
 * except, on some kernels, what came in the last hold_* ns (falcon_gro's
 * gate, split.c). The stamp precedes the flush of a poll that ran out of
 * budget (that flush follows this tracepoint), but such a NAPI stays on
 * this CPU's poll list, so the split program, which runs in its next poll,
 * reads it after the flush. */
static __always_inline void gro_flushed(struct napi_struct *napi, int work, int budget)
{
	struct net_device *dev = napi->dev;
	struct stage_dev sd = {};
	struct split_dev *s;
	struct gro_state *g;

	if (!dev)
		return;
	sd.netns_ino = dev->nd_net.net->ns.inum;
	sd.ifindex = dev->ifindex;
	s = bpf_map_lookup_elem(&falcon_split_devs, &sd);
	if (!s)
		return;
	g = bpf_map_lookup_elem(&falcon_gro, &s->hook);
	if (g)
		g->flushed_ns = bpf_ktime_get_ns() - (work < budget ? s->hold_done_ns : s->hold_busy_ns);
}

/* napi_poll(napi, work, budget): fires once the poll has returned, so
 * every skb it delivered has been through the whole stack. */
SEC("tp_btf/napi_poll")
int falcon_guard_poll(__u64 *ctx)
{
	flush_pending();
	gro_flushed((struct napi_struct *)ctx[0], (int)ctx[1], (int)ctx[2]);
	return 0;
}

/* xdp_cpumap_kthread(map_id, processed, drops, sched, stats): a cpumap
 * kthread took its next batch off its queue, so the stack is done with
 * every skb it delivered from the batches before (it delivers each before
 * it takes the next; this fires before the new batch reaches GRO). */
SEC("tp_btf/xdp_cpumap_kthread")
int falcon_guard_kthread(__u64 *ctx)
{
	flush_pending();
	return 0;
}

#define TASK_INTERRUPTIBLE 0x1
#define PF_KTHREAD 0x00200000

/* sched_switch(preempt, prev, next, prev_state): a cpumap kthread going to
 * sleep found its queue empty, so it delivered every skb it built: what it
 * left pending would otherwise wait for its CPU's next batch or poll, and
 * an idle flow for the guard timeout. It sleeps only at the top of its
 * loop, outside the section where it delivers (a lock's sleep on RT
 * kernels has another state). The check costs a few loads per switch. */
SEC("tp_btf/sched_switch")
int falcon_guard_sleep(__u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	const char want[] = "cpumap/";
	int i;

	if ((unsigned int)ctx[3] != TASK_INTERRUPTIBLE || !(prev->flags & PF_KTHREAD))
		return 0;
#pragma unroll
	for (i = 0; i < (int)sizeof(want) - 1; i++)
		if (prev->comm[i] != want[i])
			return 0;
	flush_pending();
	return 0;
}

/* kfree_skb(skb, location, reason, ...) */
SEC("tp_btf/kfree_skb")
int falcon_guard_drop(__u64 *ctx)
{
	if ((__u32)ctx[2] == bpf_core_enum_value(enum skb_drop_reason, SKB_DROP_REASON_CPU_BACKLOG))
		return count_done((struct sk_buff *)ctx[0], DROPPED_BACKLOG);
	return count_done((struct sk_buff *)ctx[0], DROPPED);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
