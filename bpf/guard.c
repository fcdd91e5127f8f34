// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/* falcon guard: the receiving half of the ordering guard (choose.h).
 *
 * Every hook counts, per (flow, hook), the segments it passes on; this
 * program counts, per flow, the segments that reach the last stage: at
 * net:netif_receive_skb of a container's end (a STAGE_LAST device in
 * falcon_stages), which fires on the CPU that runs that stage once the
 * packet has left every queue behind it. Packets dropped on the way count
 * too, since they will never arrive: any drop (skb:kfree_skb) at a device
 * on the way (a STAGE_PATH device: the gro_cells queue, the backlog, the
 * stack behind it), and at the last stage only a backlog's (reason
 * CPU_BACKLOG): later drops there come after the arrival was counted. Counts are per CPU, so no cache
 * line moves between the stage CPUs; a hook that wants to move a flow sums
 * them and compares with what it sent. */
#include <linux/bpf.h>
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
	ARRIVED = 0,
	DROPPED = 1,
	DROPPED_BACKLOG = 2, /* refused by a full backlog: never reached the stage */
};

static __always_inline int count_done(struct sk_buff *skb, int ev)
{
	struct net_device *dev = skb->dev;
	struct stage_dev sd = {};
	struct config *cfg;
	struct flow fl = {};
	__u32 zero = 0, *kind, segs = 1, fh;
	__u64 *v, n;
	__u16 gs;

	if (!dev)
		return 0;
	sd.netns_ino = dev->nd_net.net->ns.inum;
	sd.ifindex = dev->ifindex;
	kind = bpf_map_lookup_elem(&falcon_stages, &sd);
	if (!kind)
		return 0;
	if (*kind == STAGE_LAST ? ev == DROPPED : ev == ARRIVED)
		return 0;
	cfg = bpf_map_lookup_elem(&falcon_config, &zero);
	if (!cfg)
		return 0;

	/* On arrival the kernel has pulled the MAC header: data is the (inner)
	 * network header, protocol its ethertype. A drop may come after the
	 * network layer pulled its own header: there the network header
	 * offset says where the packet starts. */
	unsigned char *l3 = skb->data;
	__u32 linear = skb->len - skb->data_len;

	if (ev != ARRIVED) {
		unsigned char *nh = skb->head + skb->network_header;

		if (nh > skb->data || skb->data - nh > 128)
			return 0;
		linear += skb->data - nh;
		l3 = nh;
	}
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
	fh = flow_hash(&fl);
	v = bpf_map_lookup_elem(&falcon_done, &fh);
	if (v) {
		*v += segs;
		return 0;
	}
	n = segs;
	if (bpf_map_update_elem(&falcon_done, &fh, &n, BPF_NOEXIST)) {
		v = bpf_map_lookup_elem(&falcon_done, &fh);
		if (v)
			*v += segs;
	}
	return 0;
}

SEC("tp_btf/netif_receive_skb")
int falcon_guard_receive(__u64 *ctx)
{
	return count_done((struct sk_buff *)ctx[0], ARRIVED);
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
