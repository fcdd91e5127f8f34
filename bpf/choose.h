/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* What falcon's programs choose: the flow hash, the CPU choice over a CPU
 * set (FALCON's Algorithm 1, or the adaptive policy) and the hash that makes
 * RPS pick a CPU. The tc program (falcon.c) chooses the next device's CPU
 * with it, the XDP program (split.c) the CPU that builds the NIC stage's
 * skbs; the ordering guard around the choice is in guard.h. The Go twin of
 * every function here is internal/steer; keep the two identical (tests
 * compare them on random flows). */
#ifndef FALCON_CHOOSE_H
#define FALCON_CHOOSE_H

#include "maps.h"
#include "parse.h"
#include "rpshash.h"

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

/* A CPU set to choose from: S for the tc program, the split set for XDP.
 * cpus points into the config map value; avg is the set's average load. */
struct cpuset {
	const __u32 *cpus;
	__u32 n; /* 1..MAX_CPUS, checked by the caller */
	__u32 avg;
};

static __always_inline __u32 load_of(struct load *ld, __u32 cpu)
{
	return cpu < MAX_CPUS ? ld->pct[cpu_idx(cpu)] : 100;
}

/* FALCON's Algorithm 1: the first hash choice while its CPU is under the
 * threshold, else the second, unconditionally; inline when the set's
 * average load reaches the threshold (never with always_on). The static
 * policy keeps the first choice, busy or not. */
static __always_inline __u32 choose_paper(struct config *cfg, struct load *ld, struct cpuset *s, __u32 fh,
					  __u32 salt, int *why)
{
	__u32 h1, i;

	if (!cfg->always_on && s->avg >= cfg->threshold) {
		*why = CNT_FALLBACK_LOAD;
		return TARGET_FALLBACK;
	}
	h1 = hash32(fh + salt);
	i = cpu_idx(h1 % s->n);
	if (cfg->policy == POLICY_STATIC || load_of(ld, s->cpus[i]) < cfg->threshold) {
		*why = CNT_FIRST;
		return i;
	}
	*why = CNT_SECOND;
	return cpu_idx(hash32(h1) % s->n);
}

/* The adaptive policy: a stage moves only off a busy CPU (load at or above
 * the threshold) onto the less loaded of the flow's two hash choices, and
 * only when that one has room (below the threshold); a steered flow stays
 * while its CPU has room, since moving back would load the CPU it left.
 * Nothing moves unless the agent measured that steering pays here
 * (cfg->engaged); otherwise every stage runs inline, as without falcon.
 * prev is the flow's current target (TARGET_FALLBACK: inline). */
static __always_inline __u32 choose_adaptive(struct config *cfg, struct load *ld, struct cpuset *s, __u32 fh,
					     __u32 salt, __u32 cur, __u32 prev, int *why)
{
	__u32 h1, i1, i2, best, lb, l2;

	if (!cfg->engaged) {
		*why = CNT_FALLBACK_IDLE;
		return TARGET_FALLBACK;
	}
	if (!cfg->always_on && s->avg >= cfg->threshold) {
		*why = CNT_FALLBACK_LOAD;
		return TARGET_FALLBACK;
	}
	h1 = hash32(fh + salt);
	i1 = cpu_idx(h1 % s->n);
	i2 = cpu_idx(hash32(h1) % s->n);
	lb = load_of(ld, s->cpus[i1]);
	l2 = load_of(ld, s->cpus[i2]);
	best = i1;
	*why = CNT_FIRST;
	if (l2 < lb) {
		best = i2;
		lb = l2;
		*why = CNT_SECOND;
	}
	if (prev < s->n && load_of(ld, s->cpus[cpu_idx(prev)]) < cfg->threshold) {
		*why = prev == i1 ? CNT_FIRST : CNT_SECOND;
		return prev;
	}
	if ((prev == TARGET_FALLBACK && load_of(ld, cur) < cfg->threshold) || lb >= cfg->threshold ||
	    s->cpus[best] == cur) {
		*why = CNT_FALLBACK_IDLE;
		return TARGET_FALLBACK;
	}
	return best;
}

/* The choice for a flow whose current target is prev. Returns an index
 * into the set or TARGET_FALLBACK, and the counter that names it. */
static __always_inline __u32 choose(struct config *cfg, struct load *ld, struct cpuset *s, __u32 fh, __u32 salt,
				    __u32 cur, __u32 prev, __u64 now, int *why)
{
	if (cfg->stale_ns &&
	    (ld->updated_ns == 0 || ((__s64)(now - ld->updated_ns) > 0 && now - ld->updated_ns > cfg->stale_ns))) {
		*why = CNT_FALLBACK_STALE;
		return TARGET_FALLBACK;
	}
	if (cfg->drain) {
		/* Stopping, standing down or attaching: every flow inline. */
		*why = CNT_FALLBACK_IDLE;
		return TARGET_FALLBACK;
	}
	if (cfg->policy == POLICY_PAPER || cfg->policy == POLICY_STATIC)
		return choose_paper(cfg, ld, s, fh, salt, why);
	return choose_adaptive(cfg, ld, s, fh, salt, cur, prev, why);
}

static __always_inline __u32 kind_of(__u32 target, int why)
{
	if (target == TARGET_FALLBACK)
		return KIND_FALLBACK;
	return why == CNT_SECOND ? KIND_SECOND : KIND_FIRST;
}

#endif
