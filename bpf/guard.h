/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* The ordering guard around choose.h's choice: a flow moves to another CPU
 * only once every segment sent before has reached the last stage (counted
 * per flow in falcon_done by guard.c and split.c), and what both hooks, the
 * tc program (falcon.c) and the XDP split program (split.c), do before
 * their own part. The Go twin of the guard's rule is internal/steer. */
#ifndef FALCON_GUARD_H
#define FALCON_GUARD_H

#include "maps.h"
#include "parse.h"
#include "choose.h"

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
