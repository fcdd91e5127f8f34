// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/* falcon guard: the receiving half of the ordering guard (choose.h).
 *
 * A hook counts, per (flow, hook), the segments it passes on to the next
 * stage; this program counts them again where that stage begins: at
 * net:netif_receive_skb of every device the agent registered in
 * falcon_stages (the VXLAN devices for the NIC hooks, the containers' ends
 * for the VXLAN hooks, the NIC for the split program), which fires on the
 * CPU that runs the stage, after the backlog or cpumap queue it waited in.
 * Packets an RPS backlog drops on the way in (skb:kfree_skb with reason
 * CPU_BACKLOG) count as arrived, since they will never arrive. Counts are
 * per CPU, so no cache line moves between the stage CPUs; the hook that
 * wants to move a flow sums them.
 *
 * No vmlinux.h: the kernel fields needed are declared below with
 * preserve_access_index (CO-RE); the uapi header has no struct of these
 * names. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "falcon.h"
#include "maps.h"
#include "parse.h"
#include "choose.h"

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct net_device {
	int ifindex;
	possible_net_t nd_net;
} __attribute__((preserve_access_index));

struct sk_buff {
	struct net_device *dev;
	unsigned int len;
	unsigned int data_len;
	__be16 protocol;
	unsigned int end;
	unsigned char *head;
	unsigned char *data;
} __attribute__((preserve_access_index));

struct skb_shared_info {
	unsigned short gso_segs;
} __attribute__((preserve_access_index));

enum skb_drop_reason {
	SKB_DROP_REASON_CPU_BACKLOG = 0,
};

static __always_inline int arrived(struct sk_buff *skb)
{
	struct net_device *dev = skb->dev;
	struct stage_dev sd = {};
	struct config *cfg;
	struct flow fl = {};
	struct done_key k = {};
	__u32 zero = 0, *role, segs = 1;
	__u64 *v, one;
	__u16 gs;

	if (!dev)
		return 0;
	sd.netns_ino = dev->nd_net.net->ns.inum;
	sd.ifindex = dev->ifindex;
	role = bpf_map_lookup_elem(&falcon_stages, &sd);
	if (!role)
		return 0;
	cfg = bpf_map_lookup_elem(&falcon_config, &zero);
	if (!cfg)
		return 0;

	struct pkt p = {
		.ctx = skb,
		.data = skb->data,
		.len = skb->len - skb->data_len,
		.kmem = 1,
	};
	if (parse_l3_up(&p, *role == ROLE_SPLIT, cfg, 0, bpf_ntohs(skb->protocol), &fl))
		return 0;

	gs = BPF_CORE_READ((struct skb_shared_info *)(skb->head + skb->end), gso_segs);
	if (gs > 1)
		segs = gs;
	k.flowhash = flow_hash(&fl);
	k.role = *role;
	v = bpf_map_lookup_elem(&falcon_done, &k);
	if (v) {
		*v += segs;
		return 0;
	}
	one = segs;
	if (bpf_map_update_elem(&falcon_done, &k, &one, BPF_NOEXIST)) {
		v = bpf_map_lookup_elem(&falcon_done, &k);
		if (v)
			*v += segs;
	}
	return 0;
}

SEC("tp_btf/netif_receive_skb")
int falcon_guard_receive(__u64 *ctx)
{
	return arrived((struct sk_buff *)ctx[0]);
}

/* kfree_skb(skb, location, reason, ...) */
SEC("tp_btf/kfree_skb")
int falcon_guard_drop(__u64 *ctx)
{
	if ((__u32)ctx[2] != bpf_core_enum_value(enum skb_drop_reason, SKB_DROP_REASON_CPU_BACKLOG))
		return 0;
	return arrived((struct sk_buff *)ctx[0]);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
