/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* The fast path's side of keeping the host's conntrack in step
 * (docs/fastpath.md#conntrack; the agent's side: internal/agent/fastpath_ct.go):
 * TCP entries learned waiting and the request to the agent, and the bound
 * on an entry's idleness. Included by fastpath.c after its maps and
 * count(). */
#ifndef FALCON_FASTPATH_CT_H
#define FALCON_FASTPATH_CT_H

/* The learning points' requests to the agent (struct fp_ct_event). One
 * lost when the ring is full only delays the flow: the agent also sweeps
 * the caches for entries still waiting. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} fp_ctq SEC(".maps");

/* Keeps struct fp_ct_event in the object's BTF for bpf2go's Go type. */
const struct fp_ct_event *fp_ct_event_type __attribute__((unused));

/* What a newly learned entry of key k holds in its ct field: TCP (with
 * FP_GATE_ALL every flow) waits for the agent to keep conntrack in step,
 * unless it already has under this generation (prev: the replaced
 * entry's, or FP_CT_WAIT for a fresh one). */
static __always_inline __u8 ct_learned(struct fp_config *c, struct fp_key *k, __u8 prev)
{
	if ((c->ct_gate & FP_GATE_ALL) || ((c->ct_gate & FP_GATE_TCP) && k->proto == PROTO_TCP))
		return prev;
	return FP_CT_KEPT;
}

/* Asks the agent to keep conntrack in step with an entry just learned
 * waiting (after the entry is in its map, so the agent finds it). */
static __always_inline void ct_ask(struct fp_key *k, __u32 dir, __u32 gen)
{
	struct fp_ct_event ev = {.k = *k, .dir = dir, .gen = gen};

	bpf_ringbuf_output(&fp_ctq, &ev, sizeof(ev), 0);
}

/* Why a cached entry of the current generation may not be used now, as a
 * counter, or FP_CNT_MAX if it may: idle for longer than conntrack may
 * keep the flow (the entry is dropped, so the flow relearns), or a TCP
 * flow conntrack is not kept in step with yet. */
static __always_inline int unusable(struct fp_config *c, __u64 used_ns, __u8 ct, __u64 now)
{
	if (c->idle_ns && now - used_ns > c->idle_ns)
		return FP_IDLE;
	if (ct != FP_CT_KEPT)
		return FP_CT_WAITING;
	return FP_CNT_MAX;
}

#endif
