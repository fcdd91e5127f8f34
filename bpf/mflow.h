/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* MFLOW's micro-flows (IPDPS '23, section III-A) on an unmodified kernel:
 * the split hook (split.c) sends an elephant flow's frames to the split
 * CPUs in turns of cfg->batch consecutive packets, so one flow's NIC stage
 * (skb allocation, GRO, IP, UDP, VXLAN) and, since the tc hooks then leave
 * its packets inline, every later stage run on several CPUs at once.
 * Micro-flows reach the socket out of order between batches: TCP's
 * out-of-order queue reassembles them; UDP is split only when the user
 * accepts reordering (cfg->reorder_udp). MFLOW's in-order batch merging
 * needs a queue this kernel cannot host from BPF (docs/split-and-mflow.md).
 * The Go twin of the CPU rule is steer.NextBatchIndex. */
#ifndef FALCON_MFLOW_H
#define FALCON_MFLOW_H

#include "maps.h"
#include "choose.h"

/* The elephant rate is measured over windows this long: ten load samples'
 * worth would react too late; one packet's gap too early. */
#define MFLOW_WINDOW_NS 10000000ULL

/* A flow is an elephant after this many windows in a row at the elephant
 * rate, and stops being one at the first window below it. One window at
 * the rate can be a single burst, a paced sender catching up after a
 * stall (a 2 Mbit/s flow's 100 ms in one 10 ms window crossed 20 Mbit/s),
 * and the window after it is a mouse's again; a flow that keeps the rate
 * for two is one the next window is likely to see at it too. */
#define MFLOW_ELEPHANT_WINDOWS 2

#define PROTO_TCP 6
#define PROTO_UDP 17

/* Whether cfg splits flows of this inner protocol into micro-flows. */
static __always_inline int mflow_proto(struct config *cfg, __u32 proto)
{
	return cfg->batch && (proto == PROTO_TCP || (proto == PROTO_UDP && cfg->reorder_udp));
}

/* For the tc hooks: the flow's packets are micro-flows, whose next stages
 * stay where the split CPU built them. A per-flow choice there would send
 * every micro-flow to one CPU again. */
static __always_inline int mflow_elephant(struct config *cfg, __u32 fh, __u32 proto)
{
	struct mflow *mf;

	if (!mflow_proto(cfg, proto) || cfg->drain)
		return 0;
	mf = bpf_map_lookup_elem(&falcon_mflow, &fh);
	return mf && mf->elephant >= MFLOW_ELEPHANT_WINDOWS;
}

struct rot_ctx {
	struct config *cfg;
	struct load *ld;
	__u32 n;
	__u32 from;
	__u32 found;
};

static long rot_step(__u32 k, void *ctx)
{
	struct rot_ctx *c = ctx;
	__u32 i = (c->from + k + 1) % c->n;

	if (load_of(c->ld, c->cfg->split_cpus[cpu_idx(i)]) < c->cfg->threshold) {
		c->found = i;
		return 1;
	}
	return 0;
}

/* The split CPU of the micro-flow after the one on index from: the next in
 * the set, in turn, that is under the threshold (MFLOW spreads micro-flows
 * evenly; a busy CPU is passed over, as falcon's choices pass it over), or
 * simply the next when none is. The current one comes last. */
static __always_inline __u32 next_batch_index(struct config *cfg, struct load *ld, __u32 n, __u32 from)
{
	struct rot_ctx c = { .cfg = cfg, .ld = ld, .n = n, .from = from, .found = TARGET_FALLBACK };

	bpf_loop(n, rot_step, &c, 0);
	if (c.found == TARGET_FALLBACK)
		return (from + 1) % n;
	return c.found;
}

/* Counts a frame of len bytes to flow fh and returns its flow's entry when
 * the flow is an elephant now (NULL otherwise). A window's rate is its
 * bytes over its span: after a pause, the time since the window began. */
static __always_inline struct mflow *mflow_track(struct config *cfg, __u32 fh, __u32 len, __u64 now)
{
	struct mflow *mf, nv = {};
	__u64 span;

	mf = bpf_map_lookup_elem(&falcon_mflow, &fh);
	if (!mf) {
		nv.win_start_ns = now;
		nv.elephant = cfg->elephant_bytes == 0 ? MFLOW_ELEPHANT_WINDOWS : 0;
		nv.idx = hash32(fh); /* elephants start apart */
		bpf_map_update_elem(&falcon_mflow, &fh, &nv, BPF_ANY);
		mf = bpf_map_lookup_elem(&falcon_mflow, &fh);
		if (!mf)
			return 0;
	}
	span = now - mf->win_start_ns;
	if ((__s64)span >= (__s64)MFLOW_WINDOW_NS) {
		/* bytes / span >= elephant_bytes / window, without dividing. */
		if (mf->win_bytes * MFLOW_WINDOW_NS >= (__u64)cfg->elephant_bytes * span)
			mf->elephant += mf->elephant < MFLOW_ELEPHANT_WINDOWS;
		else
			mf->elephant = 0;
		mf->win_start_ns = now;
		mf->win_bytes = 0;
	}
	mf->win_bytes += len;
	return mf->elephant >= MFLOW_ELEPHANT_WINDOWS ? mf : 0;
}

/* The index in the split set of this frame's micro-flow: the current one
 * until batch frames went there, then the next (*started set). */
static __always_inline __u32 mflow_index(struct config *cfg, struct load *ld, struct cpuset *s, struct mflow *mf,
					 __u32 *started)
{
	*started = 0;
	if (mf->left == 0) {
		mf->idx = next_batch_index(cfg, ld, s->n, mf->idx % s->n);
		mf->left = cfg->batch;
		*started = 1;
	}
	mf->left--;
	mf->split++;
	return cpu_idx(mf->idx % s->n);
}

#endif
