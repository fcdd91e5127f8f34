/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* What falcon's programs decide: the flow hash, the CPU choice over a CPU
 * set (FALCON's Algorithm 1, or the adaptive policy), the ordering guard
 * that keeps a flow in order, and the hash that makes RPS pick a CPU. The tc program (falcon.c) chooses the next device's
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

/* One (flow, hook)'s decision. */
struct decision {
	__u32 target; /* index into the set, or TARGET_FALLBACK */
	__u32 kind;   /* enum kind */
	__u32 hit;    /* kept from the flowlet entry */
	int why;      /* counter slot */
	__u32 moved;  /* the flow changed its target with this packet */
	__u32 timeout; /* ... after the guard gave up waiting for lost packets */
};

struct sum_ctx {
	__u32 fh;
	__u32 slot;
	__u64 sum;
	__u64 last;
};

static long sum_cpu(__u32 cpu, void *ctx)
{
	struct sum_ctx *c = ctx;
	struct done *v = bpf_map_lookup_percpu_elem(&falcon_done, &c->fh, cpu);

	if (v) {
		c->sum += v->c[c->slot < DONE_SLOTS ? c->slot : DONE_ALL];
		if (v->last_ns > c->last)
			c->last = v->last_ns;
	}
	return 0;
}

/* Segments of the flow in done slot slot that reached the last stage or
 * were dropped on the way, on all CPUs; *last is when the latest of any
 * slot was counted (0: never). */
static __always_inline __u64 done_sum(struct config *cfg, __u32 fh, __u32 slot, __u64 *last)
{
	struct sum_ctx c = { .fh = fh, .slot = slot, .sum = 0, .last = 0 };
	__u32 n = cfg->ncpus;

	if (n > MAX_CPUS)
		n = MAX_CPUS;
	bpf_loop(n, sum_cpu, &c, 0);
	*last = c.last;
	return c.sum;
}

/* The guard's last resort: segments still missing are taken for lost only
 * when the flow has been idle at the hook for the guard timeout and none
 * of its segments has been counted for that long either. The hook's idle
 * alone is a guess about queue length: a paused flow whose packets still
 * trickle out of a slow queue (a busy or stalled CPU) is not lost, and
 * moving it then reorders. Signed: another CPU may have counted one after
 * now was read. */
static __always_inline int lost(struct config *cfg, __s64 idle, __u64 now, __u64 last)
{
	return idle > (__s64)cfg->guard_timeout_ns && (__s64)(now - last) > (__s64)cfg->guard_timeout_ns;
}

/* Counts segs segments of flow fh as done on this CPU, in DONE_ALL and in
 * the slots of the roles that marked them: they reached the last stage or
 * were dropped on the way (guard.c), or dropped by split.c. */
static __always_inline void add_done(__u32 fh, __u32 segs, __u32 marks)
{
	struct done *v, n = {};

	v = bpf_map_lookup_elem(&falcon_done, &fh);
	if (!v) {
		bpf_map_update_elem(&falcon_done, &fh, &n, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&falcon_done, &fh);
		if (!v)
			return;
	}
	v->last_ns = bpf_ktime_get_ns();
	v->c[DONE_ALL] += segs;
	if (marks & MARK_NIC)
		v->c[DONE_NIC] += segs;
	if (marks & MARK_OVERLAY)
		v->c[DONE_OVERLAY] += segs;
	if (marks & MARK_SPLIT)
		v->c[DONE_SPLIT] += segs;
}

/* The done slot a tc hook of this role counts against, and the mark its
 * packets carry (the split hook's: split.c). */
static __always_inline __u32 done_slot(__u32 role)
{
	return role == ROLE_NIC ? DONE_NIC : role == ROLE_OVERLAY ? DONE_OVERLAY : DONE_ALL;
}

static __always_inline __u32 role_mark(__u32 role)
{
	return role == ROLE_NIC ? MARK_NIC : role == ROLE_OVERLAY ? MARK_OVERLAY : 0;
}

/* The role marks of a tc_index that belong to the current epoch. */
static __always_inline __u32 current_marks(struct config *cfg, __u32 tc_index)
{
	if ((tc_index & MARK_SIG_MASK) != MARK_SIG || (tc_index & MARK_EPOCH) != (cfg->epoch & MARK_EPOCH))
		return 0;
	return tc_index & (MARK_NIC | MARK_OVERLAY | MARK_SPLIT);
}

/* The ordering guard around the choice. A (flow, hook) keeps its decision
 * until cfg->recheck_ns has passed, then chooses again; a changed choice
 * (another CPU, or between steered and inline) takes effect only once every
 * segment the hook passed on has reached the last stage, so no packet of
 * the flow can overtake one still queued anywhere behind this hook. The
 * next stage's receive would not do: a stage ends in queues of its own CPU
 * (gro_cells, the next backlog) that a moved packet can overtake (seen with
 * split: 2 of 300 000 datagrams). This is RFS's rule (a flow moves when the
 * old CPU's queue head passed its last packet), kept per flow.
 * A tc hook marks what it counts (MARK_*), and the last stage counts only
 * marked segments against it (done slot of its role): packets that passed
 * before the hook existed are in neither count, so a flow running through
 * an attach is guarded exactly from its first counted packet, which a hook
 * younger than the guard timeout sends behind them on the same CPU
 * (inline). The split hook (XDP) marks through
 * the frame's metadata, which the NIC's tc hook moves into tc_index (done
 * slot DONE_SPLIT); where it cannot, it counts against every arrival
 * (DONE_ALL), and a flow it first sees while it is younger than the
 * timeout (attached_ns) stays where it is until it has been quiet that
 * long (lost()). Segments lost on the way never arrive: a flow quiet for
 * cfg->guard_timeout_ns, none of its packets seen by the hook nor counted
 * at the last stage, has nothing left in any queue, and its count is
 * resynchronised (counted). Per packet with cfg->per_packet,
 * as the paper did: no entry, no guard, reordering possible. */
static __always_inline void decide(struct config *cfg, struct load *ld, struct cpuset *s, __u32 hid, __u32 salt,
				   __u32 fh, __u32 cur, __u64 now, __u32 slot, __u64 attached_ns, __u32 segs,
				   struct decision *d)
{
	struct flowlet_key fk = { .flowhash = fh, .hook = hid };
	__u32 prev, want;
	struct flowlet *fe;
	__u64 done, last;
	__s64 idle;
	__s64 out;
	int why, valid;

	d->hit = 0;
	d->moved = 0;
	d->timeout = 0;
	if (cfg->per_packet) {
		d->target = choose(cfg, ld, s, fh, salt, cur, TARGET_FALLBACK, now, &d->why);
		d->kind = kind_of(d->target, d->why);
		return;
	}
	fe = bpf_map_lookup_elem(&falcon_flowlets, &fk);
	if (!fe) {
		struct flowlet v = {};

		if (attached_ns && now - attached_ns <= cfg->guard_timeout_ns) {
			/* Young hook: packets of the flow from before it may
			 * still be queued on this CPU's path, in no count. Its
			 * first counted ones go the same way, behind them, and
			 * it moves once they arrived (next packet on). Steered
			 * at once, they overtook those (6.1 guest under
			 * emulation: a split attached under running flows, 7
			 * datagrams). Unmarked, the hook cannot tell their
			 * arrivals from its own: it waits for a quiet flow. */
			v.unsure = slot == DONE_ALL;
			v.target = TARGET_FALLBACK;
			d->why = CNT_GUARD_HOLD;
		} else {
			v.target = choose(cfg, ld, s, fh, salt, cur, TARGET_FALLBACK, now, &d->why);
		}
		v.cpu = v.target == TARGET_FALLBACK ? 0 : s->cpus[cpu_idx(v.target)];
		v.kind = kind_of(v.target, d->why);
		v.last_seen_ns = now;
		v.next_check_ns = d->why == CNT_GUARD_HOLD ? now : now + cfg->recheck_ns;
		v.sent = segs;
		v.base = done_sum(cfg, fh, slot, &last);
		bpf_map_update_elem(&falcon_flowlets, &fk, &v, BPF_ANY);
		d->target = v.target;
		d->kind = v.kind;
		return;
	}

	valid = fe->target == TARGET_FALLBACK || (fe->target < s->n && s->cpus[cpu_idx(fe->target)] == fe->cpu);
	prev = valid ? fe->target : TARGET_FALLBACK;
	/* Signed: another CPU may have stamped the entry after this one read
	 * the clock. Unsigned, that would look like an age of centuries: a
	 * flow taken for idle, its guard dropped, while it flows. */
	idle = (__s64)(now - fe->last_seen_ns);
	if (idle > 0)
		fe->last_seen_ns = now;
	d->target = fe->target;
	d->kind = fe->kind;
	if (fe->unsure) {
		/* The hook's idle first: the sum is a loop over the CPUs. */
		if (idle <= (__s64)cfg->guard_timeout_ns) {
			d->why = CNT_GUARD_HOLD;
			goto out;
		}
		done = done_sum(cfg, fh, slot, &last);
		if (!lost(cfg, idle, now, last)) {
			d->why = CNT_GUARD_HOLD;
			goto out;
		}
		/* Quiet that long: nothing of the flow is queued, so the counts
		 * can start agreeing from here. */
		fe->base = done - fe->sent;
		fe->unsure = 0;
		fe->next_check_ns = now;
	}
	if (valid && (__s64)(now - fe->next_check_ns) < 0) {
		d->hit = 1;
		d->why = CNT_FLOWLET_HIT;
		goto out;
	}
	want = choose(cfg, ld, s, fh, salt, cur, prev, now, &why);
	if (valid && want == fe->target) {
		/* Confirmed: counted as kept, so that First, Second and the
		 * fallbacks count fresh decisions only. */
		fe->next_check_ns = now + cfg->recheck_ns;
		d->hit = 1;
		d->why = CNT_FLOWLET_HIT;
		goto out;
	}
	done = done_sum(cfg, fh, slot, &last);
	out = (__s64)(fe->base + fe->sent - done);
	if (out < 0) {
		/* More arrived than was counted here (split: packets that
		 * passed while the hook was inactive): count from now, so that
		 * the next comparison is exact again. */
		fe->base = done - fe->sent;
		out = 0;
	}
	if (out > 0 && !lost(cfg, idle, now, last)) {
		/* Hold: look again soon, not on every packet. */
		fe->next_check_ns = now + (cfg->recheck_ns >> 6);
		d->why = CNT_GUARD_HOLD;
		if (!valid)
			d->target = fe->target < s->n ? fe->target : TARGET_FALLBACK;
		goto out;
	}
	if (out > 0) {
		fe->base = done - fe->sent;
		d->timeout = 1;
	}
	fe->target = want;
	fe->cpu = want == TARGET_FALLBACK ? 0 : s->cpus[cpu_idx(want)];
	fe->kind = kind_of(want, why);
	fe->next_check_ns = now + cfg->recheck_ns;
	d->target = want;
	d->kind = fe->kind;
	d->why = why;
	d->moved = 1;
out:
	__sync_fetch_and_add(&fe->sent, segs);
}

static __always_inline void count(struct counters *cnt, struct decision *d)
{
	if (d->why >= 0 && d->why < CNT_MAX)
		cnt->c[d->why]++;
	cnt->moved += d->moved;
	cnt->timeouts += d->timeout;
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
	why = parse(p, (split || st->hk->role == ROLE_NIC) && !st->hk->host_nic, st->cfg, &st->fl);
	if (!why && split && st->cfg->split_proto && st->fl.proto != st->cfg->split_proto)
		why = CNT_PASS_PROTO;
	if (why) {
		if (why > 0 && why < CNT_MAX)
			st->cnt->c[why]++;
		record(0, KIND_NONE, 0, 0, 0, 0, pass);
		return 1;
	}
	st->s.cpus = split ? st->cfg->split_cpus : st->cfg->cpus;
	st->s.n = n;
	st->s.avg = split ? st->ld->split_avg : st->ld->avg;
	st->cnt->bytes += p->len;
	return 0;
}

#endif
