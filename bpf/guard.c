// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/* falcon guard: the receiving half of the ordering guard (choose.h).
 *
 * Every hook counts, per (flow, hook), the segments it passes on; this
 * program counts, per flow, the segments that the last stage has finished
 * with. A segment reaching a container's end is seen by falcon_arrive, a
 * tc program on that device's ingress, on the CPU that runs that stage once
 * the packet has left every queue behind it. (The net:netif_receive_skb
 * tracepoint was the first counting point: on the CPU that RPS sends a
 * stage to, it did not fire for 0.1-0.3 % of the skbs the kernel processed
 * there, while tc ingress saw every one; docs/DESIGN.md.) The stack still
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

#include "falcon.h"
#include "maps.h"
#include "parse.h"
#include "choose.h"
#include "kernel.h"

enum skb_drop_reason {
	SKB_DROP_REASON_CPU_BACKLOG = 0,
};

enum event {
	DROPPED = 1,
	DROPPED_BACKLOG = 2, /* refused by a full backlog: never reached the stage */
};

/* The segment that reached a last stage on this CPU and is still on its way
 * up the stack: counted when this CPU's next arrival comes (the stack
 * handles one skb at a time, to the socket, before the next) or when the
 * NAPI poll that carried it returns, whichever comes first. */
struct pending {
	__u32 fh;
	__u32 segs;  /* 0: none */
	__u32 marks; /* MARK_* of the current epoch ... */
	__u32 epoch; /* ... which this was: a comeback forgets every count */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pending);
} falcon_pending SEC(".maps");

/* Counts the pending segment, if any, and returns the slot (NULL only if
 * the map is missing). An arrival outside any NAPI poll (a driver that
 * delivers from process context) waits for this CPU's next arrival or
 * poll, and its flow for the guard timeout at worst: late, never early. */
static __always_inline struct pending *flush_pending(void)
{
	__u32 zero = 0;
	struct pending *p = bpf_map_lookup_elem(&falcon_pending, &zero);

	/* An arrival noted before a stand-down is flushed at the first
	 * arrival or poll after the comeback, into counts that started
	 * afresh: counted there, it would let its flow move one segment
	 * early. (The configuration is looked up only then: this runs at
	 * every NAPI poll.) */
	if (p && p->segs) {
		struct config *cfg = bpf_map_lookup_elem(&falcon_config, &zero);

		if (cfg && p->epoch == cfg->epoch)
			add_done(p->fh, p->segs, p->marks);
		p->segs = 0;
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

/* tc ingress of every container's end (a STAGE_LAST device): notes the
 * arrival as pending, with the hooks' marks, and counts the one before it.
 * Passes every packet on, its tc_index cleared of falcon's mark. */
SEC("tc")
int falcon_arrive(struct __sk_buff *skb)
{
	struct pkt p = {
		.ctx = skb,
		.data = (void *)(long)skb->data,
		.end = (void *)(long)skb->data_end,
		.len = skb->len,
	};
	struct pending *pd = flush_pending();
	struct config *cfg;
	struct flow fl = {};
	__u32 zero = 0;

	__u32 mark = skb->tc_index;

	cfg = bpf_map_lookup_elem(&falcon_config, &zero);
	if ((mark & MARK_SIG_MASK) == MARK_SIG)
		skb->tc_index = 0;
	if (!pd || !cfg || parse(&p, 0, cfg, &fl))
		return TC_ACT_UNSPEC;
	pd->fh = flow_hash(&fl);
	pd->segs = skb->gso_segs > 1 ? skb->gso_segs : 1;
	pd->marks = current_marks(cfg, mark);
	pd->epoch = cfg->epoch;
	return TC_ACT_UNSPEC;
}

/* A poll of a split NIC returned: GRO has let go of what the poll brought,
 * except, on some kernels, what came in the last hold_* ns (falcon_gro's
 * gate, split.c). The stamp precedes the flush of a poll that ran out of
 * budget (that flush follows this tracepoint), but on this CPU, where the
 * split program reads it next, it has happened by then. */
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

/* kfree_skb(skb, location, reason, ...) */
SEC("tp_btf/kfree_skb")
int falcon_guard_drop(__u64 *ctx)
{
	if ((__u32)ctx[2] == bpf_core_enum_value(enum skb_drop_reason, SKB_DROP_REASON_CPU_BACKLOG))
		return count_done((struct sk_buff *)ctx[0], DROPPED_BACKLOG);
	return count_done((struct sk_buff *)ctx[0], DROPPED);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
