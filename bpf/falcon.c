// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/* falcon: FALCON's softirq pipelining on an unmodified kernel.
 *
 * Attached at tc of one device, the program decides on which CPU the NEXT
 * device's stage runs: it sets skb->hash with bpf_set_hash() so that the next
 * device's RPS map (rps_cpus = the Falcon CPU set S, set by user space) picks
 * the CPU that FALCON's Algorithm 1 chose. An L4 hash survives VXLAN
 * decapsulation, the bridge and veth, so a NIC hook steers the VXLAN device's
 * stage and an overlay hook steers the container's stage.
 *
 * The parser is parse.h, the decision choose.h and guard.h; split.c uses them for the
 * NIC stage itself. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "datapath.h"
#include "maps.h"
#include "parse.h"
#include "guard.h"
#include "mflow.h"

/* TC_ACT_UNSPEC (TCX_NEXT) rather than TC_ACT_OK: the packet passes either
 * way, but UNSPEC lets other programs on the device (Cilium, Calico eBPF)
 * still run after ours. */
#define PASS TC_ACT_UNSPEC

SEC("tc")
int falcon_steer(struct __sk_buff *skb)
{
	__u32 hid = hook_id, fh, dest, cur, h, target;
	struct pkt p = {
		.ctx = skb,
		.data = (void *)(long)skb->data,
		.end = (void *)(long)skb->data_end,
		.len = skb->len,
		.xdp = 0,
	};
	struct hook_state st = {};
	struct decision dc;

	if (hook_begin(hid, &p, 0, &st, PASS))
		return PASS;
	/* The split program's mark, in the metadata of the frame this skb
	 * was built from (split.c), goes on with the packet. */
	__u32 split = 0;
	if (st.hk->role == ROLE_NIC) {
		__u32 *meta = (void *)(long)skb->data_meta;

		if ((void *)(meta + 1) <= (void *)(long)skb->data)
			split = current_marks(st.cfg, *meta) & MARK_SPLIT;
	}

	fh = flow_hash(&st.fl);
	cur = bpf_get_smp_processor_id();
	if (mflow_elephant(st.cfg, fh, st.fl.proto)) {
		/* A micro-flow: its next stage runs where this one does, on
		 * the split CPU that built it (hash 0: no RPS). Unmarked and
		 * uncounted in the guard's sent: no decision moves it. */
		st.cnt->c[CNT_MFLOW]++;
		bpf_set_hash(skb, 0);
		count_steered(st.cnt, hid, cur);
		record(fh, KIND_NONE, cur, 0, 0, skb->hash, PASS);
		return PASS;
	}
	decide(st.cfg, st.ld, &st.s, hid, st.hk->next_ifindex, fh, cur, bpf_ktime_get_ns(), done_slot(st.hk->role),
	       st.hk->attached_ns, skb->gso_segs > 1 ? skb->gso_segs : 1, &dc);
	count(st.cnt, &dc);
	/* Counted in sent above: marked, so the last stage counts it back.
	 * The NIC hook starts the mark; the overlay hook adds its role. */
	skb->tc_index = MARK_SIG | (st.cfg->epoch & MARK_EPOCH) | role_mark(st.hk->role) | split |
			(st.hk->role == ROLE_OVERLAY ? current_marks(st.cfg, skb->tc_index) : 0);

	if (dc.target != TARGET_FALLBACK) {
		target = cpu_idx(dc.target);
		dest = st.cfg->cpus[target];
		h = steer_hash(fh, target, st.s.n);
	} else {
		/* The next stage stays on this CPU. Hash 0 makes get_rps_cpu() do no
		 * RPS (verified on 6.18: the VXLAN stage then runs inside the
		 * gro_cells poll); "local" aims RPS here, one backlog trip more. */
		__u16 pos = cur < MAX_CPUS ? st.cfg->pos[cpu_idx(cur)] : 0;

		dest = cur;
		h = 0;
		if (st.cfg->fallback == FALLBACK_LOCAL && pos > 0 && pos <= st.s.n)
			h = steer_hash(fh, pos - 1, st.s.n);
	}
	bpf_set_hash(skb, h);
	count_steered(st.cnt, hid, dest);
	record(fh, dc.kind, dest, dc.hit, h, skb->hash, PASS);
	return PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
