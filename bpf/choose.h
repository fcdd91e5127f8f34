/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* What falcon's programs decide: the flow hash, FALCON's Algorithm 1 over a
 * CPU set, the flowlet rule that keeps a flow in order, and the hash that
 * makes RPS pick a CPU. The tc program (falcon.c) chooses the next device's
 * CPU with it, the XDP program (split.c) the CPU that builds the NIC
 * stage's skbs. The Go twin of every function here is internal/steer; keep
 * the two identical (tests compare them on random flows). */
#ifndef FALCON_CHOOSE_H
#define FALCON_CHOOSE_H

#include "maps.h"
#include "parse.h"

#define CPU_MASK (MAX_CPUS - 1)

/* An index into cpus[]/pos[] the verifier can bound. The empty asm hides the
 * value from clang, which would otherwise drop a mask it can prove is a no-op
 * (x < n <= MAX_CPUS), a fact the verifier cannot see through % or loads. */
static __always_inline __u32 cpu_idx(__u32 x)
{
	asm volatile("" : "+r"(x));
	return x & CPU_MASK;
}

static __always_inline __u32 rotl32(__u32 x, int r)
{
	return (x << r) | (x >> (32 - r));
}

/* murmur3's finaliser: every input bit flips each output bit with p ~ 1/2. */
static __always_inline __u32 hash32(__u32 h)
{
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

static __always_inline __u32 mix(__u32 h, __u32 k)
{
	k *= 0xcc9e2d51;
	k = rotl32(k, 15);
	k *= 0x1b873593;
	h ^= k;
	h = rotl32(h, 13);
	return h * 5 + 0xe6546b64;
}

#define FLOW_SEED 0x46414c43 /* "FALC" */

/* murmur3_32 over the inner 5-tuple as big-endian words; the same value at
 * every stage, so one flow has one identity everywhere. */
static __always_inline __u32 flow_hash(struct flow *fl)
{
	__u32 h = FLOW_SEED, words;
	int i;

	if (fl->v6) {
#pragma unroll
		for (i = 0; i < 4; i++)
			h = mix(h, fl->src[i]);
#pragma unroll
		for (i = 0; i < 4; i++)
			h = mix(h, fl->dst[i]);
		words = 10;
	} else {
		h = mix(h, fl->src[0]);
		h = mix(h, fl->dst[0]);
		words = 4;
	}
	h = mix(h, fl->ports);
	h = mix(h, fl->proto | (fl->v6 ? 6 : 4) << 8);
	h ^= words * 4;
	return hash32(h);
}

/* A hash that get_rps_cpu() maps to the idx-th of n CPUs:
 * reciprocal_scale(h, n) = (h * n) >> 32 = idx  <=>
 * h in [ceil(idx * 2^32 / n), ceil((idx + 1) * 2^32 / n) - 1]. The flow hash
 * fills the low bits so sockets still tell flows apart; 0 would mean "no
 * RPS", so it is never returned. */
static __always_inline __u32 steer_hash(__u32 fh, __u32 idx, __u32 n)
{
	__u64 lo = (((__u64)idx << 32) + n - 1) / n;
	__u64 hi = (((__u64)(idx + 1) << 32) + n - 1) / n;
	__u32 h = lo + (__u64)fh % (hi - lo);

	return h ? h : 1;
}

/* A CPU set to choose from: S for the tc program, the split set for XDP.
 * cpus points into the config map value; avg is the set's average load. */
struct cpuset {
	const __u32 *cpus;
	__u32 n; /* 1..MAX_CPUS, checked by the caller */
	__u32 avg;
};

/* FALCON's Algorithm 1. Returns an index into the set or TARGET_FALLBACK,
 * and the counter that names the decision. */
static __always_inline __u32 choose(struct config *cfg, struct load *ld, struct cpuset *s, __u32 fh,
				    __u32 salt, __u64 now, int *why)
{
	__u32 h1, h2, i, c;

	if (cfg->stale_ns &&
	    (ld->updated_ns == 0 || ((__s64)(now - ld->updated_ns) > 0 && now - ld->updated_ns > cfg->stale_ns))) {
		*why = CNT_FALLBACK_STALE;
		return TARGET_FALLBACK;
	}
	if (s->avg >= cfg->threshold) {
		*why = CNT_FALLBACK_LOAD;
		return TARGET_FALLBACK;
	}
	h1 = hash32(fh + salt);
	i = cpu_idx(h1 % s->n);
	c = s->cpus[i];
	if (c < MAX_CPUS && ld->pct[c] < cfg->threshold) {
		*why = CNT_FIRST;
		return i;
	}
	h2 = hash32(h1);
	*why = CNT_SECOND;
	return cpu_idx(h2 % s->n);
}

/* One (flow, hook)'s decision. */
struct decision {
	__u32 target; /* index into the set, or TARGET_FALLBACK */
	__u32 kind;   /* enum kind */
	__u32 hit;    /* kept from the flowlet entry */
	int why;      /* counter slot */
};

/* The flowlet rule around Algorithm 1: a (flow, hook) keeps its decision
 * while its packets keep coming, and chooses afresh only after an idle gap
 * (or when its CPU left the set), so that neither switching on or off nor
 * rebalancing reorders a flow. Per packet with cfg->per_packet, as the
 * paper did. */
static __always_inline void decide(struct config *cfg, struct load *ld, struct cpuset *s, __u32 hid,
				   __u32 salt, __u32 fh, __u64 now, struct decision *d)
{
	struct flowlet_key fk = {};
	struct flowlet *fe = NULL;

	d->hit = 0;
	if (!cfg->per_packet) {
		fk.flowhash = fh;
		fk.hook = hid;
		fe = bpf_map_lookup_elem(&falcon_flowlets, &fk);
		if (fe && (__s64)(now - fe->last_seen_ns) <= (__s64)cfg->flowlet_gap_ns &&
		    (fe->target == TARGET_FALLBACK ||
		     (fe->target < s->n && s->cpus[cpu_idx(fe->target)] == fe->cpu))) {
			fe->last_seen_ns = now;
			d->target = fe->target;
			d->kind = fe->kind;
			d->hit = 1;
			d->why = CNT_FLOWLET_HIT;
			return;
		}
	}
	d->target = choose(cfg, ld, s, fh, salt, now, &d->why);
	d->kind = d->target == TARGET_FALLBACK ? KIND_FALLBACK : (d->why == CNT_SECOND ? KIND_SECOND : KIND_FIRST);
	if (!cfg->per_packet) {
		struct flowlet v = {
			.target = d->target,
			.cpu = d->target == TARGET_FALLBACK ? 0 : s->cpus[cpu_idx(d->target)],
			.kind = d->kind,
			.last_seen_ns = now,
		};
		if (fe)
			*fe = v;
		else
			bpf_map_update_elem(&falcon_flowlets, &fk, &v, BPF_ANY);
	}
}

static __always_inline void count(struct counters *cnt, int why)
{
	if (why >= 0 && why < CNT_MAX)
		cnt->c[why]++;
}

static __always_inline void count_steered(struct counters *cnt, __u32 hid, __u32 cpu)
{
	struct steer_key k = { .hook = hid, .cpu = cpu };
	__u64 one = 1, *v;

	if (cpu < STEER_SLOTS) {
		cnt->to[cpu]++;
		return;
	}
	v = bpf_map_lookup_elem(&falcon_steered, &k);
	if (v)
		*v += 1;
	else
		bpf_map_update_elem(&falcon_steered, &k, &one, BPF_NOEXIST);
}


/* What both hooks, the tc program and the XDP split program, look up and
 * decide before their own part: this hook's counters and slot, the config,
 * the load, the packet's inner flow and the CPU set to choose from. */
struct hook_state {
	struct counters *cnt;
	struct config *cfg;
	struct hook *hk;
	struct load *ld;
	struct cpuset s;
	struct flow fl;
};

/* Returns 0 when the packet is overlay traffic to decide on, with st
 * filled; otherwise nonzero, the packet already counted and recorded as
 * passed with verdict pass, to be passed untouched. split selects the split
 * set (and --split-proto) instead of the Falcon set; a split hook always
 * sits on the NIC, so the packet is always encapsulated there. */
static __always_inline int hook_begin(__u32 hid, struct pkt *p, int split, struct hook_state *st, __u32 pass)
{
	__u32 zero = 0, n;
	int why;

	st->cnt = bpf_map_lookup_elem(&falcon_counters, &hid);
	st->hk = bpf_map_lookup_elem(&falcon_hooks, &hid);
	st->cfg = bpf_map_lookup_elem(&falcon_config, &zero);
	st->ld = bpf_map_lookup_elem(&falcon_load, &zero);
	if (!st->cnt || !st->hk || !st->cfg || !st->ld)
		return 1;

	n = split ? st->cfg->split_n : st->cfg->n;
	if (!st->hk->active || n == 0 || n > MAX_CPUS) {
		st->cnt->c[CNT_PASS_DISABLED]++;
		record(0, KIND_NONE, 0, 0, 0, 0, pass);
		return 1;
	}
	why = parse(p, split || st->hk->role == ROLE_NIC, st->cfg, &st->fl);
	if (!why && split && st->cfg->split_proto && st->fl.proto != st->cfg->split_proto)
		why = CNT_PASS_PROTO;
	if (why) {
		count(st->cnt, why);
		record(0, KIND_NONE, 0, 0, 0, 0, pass);
		return 1;
	}
	st->s.cpus = split ? st->cfg->split_cpus : st->cfg->cpus;
	st->s.n = n;
	st->s.avg = split ? st->ld->split_avg : st->ld->avg;
	return 0;
}

#endif
