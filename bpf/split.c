// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/* falcon split: FALCON's GRO splitting and MFLOW's IRQ splitting on an
 * unmodified kernel.
 *
 * Attached as native XDP on the NIC, the program runs in the driver's poll,
 * before any skb exists. For overlay (VXLAN) packets, or every IP packet on
 * a NIC of the host network itself (hook host_nic: FALCON's Host+, whose
 * own sockets receive them), it chooses a CPU of the split set by the same
 * rule as the tc program (Algorithm 1 with flowlets, salted with the NIC's
 * ifindex) and redirects the frame into that CPU's
 * cpumap entry: the CPU's cpumap kthread builds the skb and, from Linux
 * 6.15, runs GRO on it, then IP, UDP and VXLAN decapsulation. The interrupt
 * CPU keeps only the driver poll and this program. Everything else passes.
 *
 * The skb cpumap builds carries no hash, so the tc program on the NIC, which
 * runs in that kthread, still steers the VXLAN device's stage: splitting and
 * pipelining compose. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "datapath.h"
#include "maps.h"
#include "parse.h"
#include "guard.h"
#include "mflow.h"

/* The id of falcon_cpumap below, set at load: the tracepoints fire for
 * every cpumap on the machine and count only ours. */
const volatile __u32 cpumap_id = 0;

/* Each entry's queue size (CPUMapQueue), set at load. */
const volatile __u32 cpumap_qsize = 0;

/* Keyed by CPU id; the loader sizes it to the possible CPUs and creates
 * entries (with their kthreads) only for the split set. The value is the
 * queue size alone: no program runs on the entries. */
struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, MAX_CPUS);
	__type(key, __u32);
	__type(value, __u32);
} falcon_cpumap SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, __u32);
	__type(value, struct split_stats);
} falcon_split_stats SEC(".maps");

/* The cpumap queue is a ptr_ring, whose consumer clears the slots it took
 * in batches of two cache lines of pointers (16 on x86, 32 with 128-byte
 * lines): until it does, up to a batch less one slots look taken. Measured
 * here: a queue of 2048 refused frames with 2034-2041 in it. */
#define PTR_RING_LAG 32

/* Takes a place in the CPU's cpumap queue for one frame, or reports that
 * the queue might be full. A full queue drops what the bulk flush cannot
 * put on it, after this program ran and where no program sees the frame's
 * flow: its guard would wait for that frame until the flow pauses, which a
 * full-rate flow never does. So the program never lets the queue fill: it
 * counts the frames redirected to the CPU and not yet taken off its queue
 * by the kthread (or refused by it), including those still in a bulk
 * queue, and refuses the frame that would make them more than the queue
 * holds, less what the ring's lazy clearing hides. The kthread's count
 * lags (its tracepoint follows its batch), and two CPUs reserving at once
 * may both read the later total: either way it refuses early, never late. */
static __always_inline int reserve(struct split_stats *s, int micro)
{
	__s64 room = (__s64)cpumap_qsize - PTR_RING_LAG;

	/* Micro-flows leave a quarter of the queue to guarded flows, whose
	 * frames a full queue drops (a micro-flow's is built inline): one
	 * elephant at full rate filled a split CPU's queue and a guarded
	 * frame behind it was dropped (TestMflowLayouts, flannel). */
	if (micro)
		room -= (__s64)((__u64)room >> 2);
	__sync_fetch_and_add(&s->redirected, 1);
	__s64 out = (__s64)(s->redirected - s->consumed - s->enqueue_drops);

	if (out <= room)
		return 1;
	__sync_fetch_and_add(&s->redirected, -1);
	return 0;
}

/* Writes the split mark of the current epoch into the frame's metadata,
 * where the NIC's tc hook (falcon.c), the first program to see the skb
 * built from it (inline or by the cpumap kthread), moves it into tc_index
 * for the last stage to count. While the program marks, every frame of a
 * flow carries the same bytes, so GRO, which merges only equal metadata,
 * merges as before; gro_gate says when it may start and stop. */
static __always_inline int mark_meta(struct xdp_md *ctx, struct config *cfg)
{
	__u32 *meta;

	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*meta)))
		return 0;
	meta = (void *)(long)ctx->data_meta;
	if ((void *)(meta + 1) > (void *)(long)ctx->data)
		return 0;
	*meta = MARK_SIG | MARK_SPLIT | (cfg->epoch & MARK_EPOCH);
	return 1;
}

/* Whether this frame may carry the mark. GRO merges a flow's frames only
 * while their metadata is equal; a frame that differs from those it holds
 * starts an entry of its own, and an entry that a segment completes (PSH,
 * or full) leaves at once while the older one waits for the poll's end.
 * Where marked and unmarked frames of one flow meet, the flow is reordered:
 * at an attach (frames polled before it carry nothing), and at a detach
 * (the frames after it carry nothing). Seen as TCP segments out of order at
 * falcon's comebacks and stand-downs, 3 us apart on the NIC's CPU. So the
 * program changes between marking and not only once every frame it polled
 * has left GRO (gro_flushed in guard.c stamps that), starting unmarked at
 * the attach (the loader resets this state) and ending unmarked once the
 * agent asks (cfg->unmark) before a detach. The state is the NIC's NAPI's,
 * not a CPU's: kept per CPU, the NIC's NAPI moving to a CPU it had not run
 * on since the attach found the gate closed there and passed its frames
 * inline, unmarked and unguarded, past frames of the same flows still in
 * that CPU's cpumap queue (TCP reordered 200-440 segments in about 1 run
 * of 15 of TestTCPOrderThroughSwitches/docker/split, traced by stagetrace's
 * paths). */
static __always_inline int gro_gate(struct config *cfg, __u32 hid, __u64 now)
{
	struct gro_state *g = bpf_map_lookup_elem(&falcon_gro, &hid);
	__u32 want = !cfg->unmark;

	if (!g)
		return 0;
	/* The first frame here since the attach may share its poll with
	 * frames the kernel built before it, unmarked and in no stamp: only
	 * a poll that returns after it lets go of them. */
	if (g->seen && g->meta != want && (__s64)(g->flushed_ns - g->last_ns) > 0)
		g->meta = want;
	g->seen = 1;
	g->last_ns = now;
	return g->meta;
}

/* Sends the frame to dest's cpumap queue. Where the queue might be full
 * (reserve), a micro-flow's frame is built here instead: it is unguarded,
 * so passing reorders nothing that micro-flows do not already, and it is
 * what the kernel does without falcon, where a full queue would drop what
 * vanilla delivers (seen: one TCP flow at 5 Gbit/s, split CPUs 0-1, the
 * kthread of the interrupt CPU starved by its softirq, 200-6800 frames). A
 * guarded flow's frame is dropped. */
static __always_inline int split_to(struct hook_state *st, __u32 hid, __u32 fh, __u32 dest, __u32 cur,
				    __u32 kind, __u32 hit, __u32 mark, int micro)
{
	struct split_stats *sst = bpf_map_lookup_elem(&falcon_split_stats, &dest);
	__u32 action;

	if (sst && !reserve(sst, micro)) {
		if (micro) {
			__sync_fetch_and_add(&sst->full_inline, 1);
			count_steered(st->cnt, hid, cur);
			record(fh, kind, cur, hit, 0, 0, XDP_PASS);
			return XDP_PASS;
		}
		/* Dropped here rather than by the full queue, where no program
		 * sees which flow lost it: counted done, since it will never
		 * arrive, so that its flow's guard does not wait for it. */
		__sync_fetch_and_add(&sst->full, 1);
		add_done(fh, 1, mark);
		record(fh, kind, dest, hit, 0, 0, XDP_DROP);
		return XDP_DROP;
	}
	action = bpf_redirect_map(&falcon_cpumap, dest, XDP_PASS);
	if (action != XDP_REDIRECT && sst) {
		__sync_fetch_and_add(&sst->redirect_fail, 1);
		__sync_fetch_and_add(&sst->redirected, -1);
	}
	count_steered(st->cnt, hid, action == XDP_REDIRECT ? dest : cur);
	record(fh, kind, dest, hit, 0, 0, action);
	return action;
}

SEC("xdp")
int falcon_split(struct xdp_md *ctx)
{
	__u32 hid = hook_id, fh, cur, started, action = XDP_PASS;
	struct pkt p = {
		.ctx = ctx,
		.data = (void *)(long)ctx->data,
		.end = (void *)(long)ctx->data_end,
		.len = bpf_xdp_get_buff_len(ctx),
		.xdp = 1,
	};
	struct hook_state st = {};
	struct decision dc;
	struct mflow *mf;
	__u64 now;

	if (hook_begin(hid, &p, 1, &st, XDP_PASS))
		return XDP_PASS;

	fh = flow_hash(&st.fl);
	cur = bpf_get_smp_processor_id();
	now = bpf_ktime_get_ns();
	/* An elephant goes in micro-flows, unguarded: reordering between
	 * them is what MFLOW trades for one flow on several CPUs. Draining,
	 * every flow goes back inline under its guard. */
	if (mflow_proto(st.cfg, st.fl.proto) && !st.cfg->drain) {
		mf = mflow_track(st.cfg, fh, p.len, now);
		if (mf) {
			__u32 i = mflow_index(st.cfg, st.ld, &st.s, mf, &started);

			st.cnt->c[CNT_MFLOW]++;
			st.cnt->batches += started;
			return split_to(&st, hid, fh, st.cfg->split_cpus[i], cur, KIND_FIRST, 0, 0, 1);
		}
	}
	/* Marked, the packet is guarded exactly from the first one counted, as
	 * the tc hooks' are. Unmarked (no tc hook on the NIC to carry the
	 * mark, or no room for metadata), it counts against every arrival of
	 * its flow, and a flow first seen while the program is younger than
	 * the guard timeout stays where it is until it idles that long: a
	 * guess that packets from before are gone, which a CPU busy with those
	 * very packets (the sender idles because its CPU is draining them)
	 * proved wrong under emulation (6.1 guest: 7-8 datagrams each of 8
	 * flows overtaken at one comeback). */
	__u32 mark = 0, slot = DONE_ALL;
	if (st.hk->marks) {
		if (!gro_gate(st.cfg, hid, now)) {
			/* As if not attached: unmarked, in no count, built here. */
			st.cnt->c[CNT_GUARD_HOLD]++;
			count_steered(st.cnt, hid, cur);
			record(fh, KIND_NONE, cur, 0, 0, 0, action);
			return action;
		}
		if (mark_meta(ctx, st.cfg)) {
			mark = MARK_SPLIT;
			slot = DONE_SPLIT;
		}
	}
	decide(st.cfg, st.ld, &st.s, hid, st.hk->next_ifindex, fh, cur, now, slot, st.hk->attached_ns, 1, &dc);
	count(st.cnt, &dc);

	/* Fallback: the skb is built here, as without falcon. A choice of this
	 * very CPU still goes through its kthread: one flow's interrupts may
	 * move between CPUs (TCP sends from the softirq that took an ACK), and
	 * frames built inline would overtake those still queued for the
	 * kthread (seen on the testbed as TCP reordering). */
	if (dc.target != TARGET_FALLBACK)
		return split_to(&st, hid, fh, st.cfg->split_cpus[cpu_idx(dc.target)], cur, dc.kind, dc.hit, mark, 0);
	count_steered(st.cnt, hid, cur);
	record(fh, dc.kind, cur, dc.hit, 0, 0, action);
	return action;
}

/* xdp_cpumap_enqueue(int map_id, unsigned int processed, unsigned int drops,
 * int to_cpu): one bulk of frames flushed into to_cpu's queue, on the CPU
 * that redirected them; drops of them found the queue full. */
SEC("raw_tracepoint/xdp_cpumap_enqueue")
int falcon_cpumap_enqueue(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 map_id = ctx->args[0], processed = ctx->args[1], drops = ctx->args[2], to = ctx->args[3];
	struct split_stats *st;

	if (map_id != cpumap_id)
		return 0;
	st = bpf_map_lookup_elem(&falcon_split_stats, &to);
	if (!st)
		return 0;
	__sync_fetch_and_add(&st->enqueued, processed - drops);
	__sync_fetch_and_add(&st->enqueue_drops, drops);
	__sync_fetch_and_add(&st->bulks, 1);
	return 0;
}

/* xdp_cpumap_kthread(int map_id, unsigned int processed, unsigned int drops,
 * int sched, ...): one round of a cpumap kthread, on its own CPU; only that
 * kthread writes this half of the CPU's entry. */
SEC("raw_tracepoint/xdp_cpumap_kthread")
int falcon_cpumap_kthread(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 map_id = ctx->args[0], processed = ctx->args[1], drops = ctx->args[2];
	__u32 cpu = bpf_get_smp_processor_id();
	struct split_stats *st;

	if (map_id != cpumap_id)
		return 0;
	st = bpf_map_lookup_elem(&falcon_split_stats, &cpu);
	if (!st)
		return 0;
	st->built += processed - drops;
	st->build_drops += drops;
	st->consumed += processed;
	if (processed)
		st->batches++;
	if (ctx->args[3])
		st->sleeps++;
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
