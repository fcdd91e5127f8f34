/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* The fast path's ordering guard (docs/ordering-guard.md, docs/fastpath.md):
 * a flow takes the fast path only while none of its packets is still on
 * the slow path. Included by fastpath.c after its maps. */
#ifndef FALCON_FASTPATH_GUARD_H
#define FALCON_FASTPATH_GUARD_H

/* When a packet of any flow last went to the slow path, per direction
 * (FP_DIR_IN, FP_DIR_EG). GUARD_NS later none of them can be in flight, so
 * with every flow cached (the steady state of a busy host) the guard and
 * the programs where the slow path ends have nothing to look up: per packet
 * that saves four hash lookups and two parses. A plain store: CPUs racing
 * may leave a time some microseconds older than the newest, far inside
 * GUARD_NS's margin, the same race each flow's last_ns has. */
enum { FP_DIR_IN, FP_DIR_EG, FP_DIRS };

/* Slots FP_DIRS + dir: when a packet of direction dir last passed while the
 * fast path was off (the agent judging the host's rules again): it took
 * the slow path uncounted, so for GUARD_NS after it no flow of dir may
 * take the fast path, whatever its own count says. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * FP_DIRS);
	__type(key, __u32);
	__type(value, __u64);
} fp_slow_at SEC(".maps");

static __always_inline void slow_now(__u32 dir, __u64 now)
{
	__u64 *at = bpf_map_lookup_elem(&fp_slow_at, &dir);

	if (at)
		*at = now;
}

/* A packet of direction dir passes uncounted (the fast path is off). */
static __always_inline void blind_now(__u32 dir, __u64 now)
{
	__u32 k = FP_DIRS + dir;
	__u64 *at = bpf_map_lookup_elem(&fp_slow_at, &k);

	if (at)
		*at = now;
}

/* Can a packet of direction dir still be on the slow path? */
static __always_inline int slow_recent(__u32 dir, __u64 now)
{
	__u64 *at = bpf_map_lookup_elem(&fp_slow_at, &dir);

	return !at || now - *at <= GUARD_NS;
}

/* The ordering guard: may the flow take the fast path now? Only when none
 * of its packets is still on the slow path (or the last went there so long
 * ago that it has been delivered or dropped). */
static __always_inline int guard_open(void *pend, __u32 dir, struct fp_key *k, __u64 now)
{
	__u32 blind = FP_DIRS + dir;
	struct fp_pending *p;
	__u64 *at = bpf_map_lookup_elem(&fp_slow_at, &blind);

	if (!at || now - *at <= GUARD_NS)
		return 0;
	if (!slow_recent(dir, now))
		return 1;
	p = bpf_map_lookup_elem(pend, k);

	if (!p || !p->inflight)
		return 1;
	if (now - p->last_ns > GUARD_NS) {
		p->inflight = 0;
		return 1;
	}
	return 0;
}

/* Is the packet's identity (in id: ingress, its outer addresses, VNI and
 * port; egress, its veth) the one the record holds? */
static __always_inline int same_identity(struct fp_pending *p, struct fp_pending *id)
{
	return p->outer_saddr == id->outer_saddr && p->outer_daddr == id->outer_daddr && p->vni == id->vni &&
	       p->port == id->port && p->ifindex == id->ifindex;
}

/* A packet of the flow goes to the slow path without a record (its tenant
 * is past its share): the guard cannot hold the flow's fast packets behind
 * it, so the flow loses its entry. */
static __always_inline void uncache(__u32 dir, struct fp_key *k)
{
	if (dir == FP_DIR_IN) {
		struct fp_ingress *e = bpf_map_lookup_elem(&fp_in, k);

		if (e)
			forget_in(k, e);
	} else {
		struct fp_egress *e = bpf_map_lookup_elem(&fp_eg, k);

		if (e)
			forget_eg(k, e);
	}
}

/* Who a new record of direction dir is charged to: ingress, the remote
 * host (the receiving container is not known before the slow path has
 * delivered); egress, the container's host-side veth. */
static __always_inline int may_record(struct fp_config *c, __u32 dir, struct fp_pending *id, __u64 now)
{
	if (dir == FP_DIR_IN)
		return may_begin(c, FP_TENANT_REMOTE, id->outer_saddr, now);
	return may_begin(c, FP_TENANT_VETH, id->ifindex, now);
}

/* Counts n of a flow's packets out of flight. More than are in flight:
 * the rest came after the guard gave up on them. Two CPUs racing here may
 * take the count below zero, which closes the guard until GUARD_NS: a flow
 * left slow a while, never a packet overtaken. */
static __always_inline void take(struct fp_pending *p, __u32 n)
{
	__u32 was = p->inflight;

	if (was)
		__sync_fetch_and_add(&p->inflight, -(n < was ? n : was));
}

/* Hands a packet of the flow to the slow path: counts it in flight and
 * notes what it looked like (id: where it came from), so the end of the
 * slow path can tell what the overlay changed and which identity the
 * packets it delivers can have had. A new record needs room in its
 * tenant's share (fastpath_share.h). */
static __always_inline void to_slow(void *pend, __u32 dir, struct inner *in, struct fp_pending *id, struct fp_config *c,
				    __u64 now, __u32 segs)
{
	struct fp_pending *p = bpf_map_lookup_elem(pend, &in->k);
	__u32 gen = c->gen;
	int fresh;

	slow_now(dir, now);
	if (p && p->inflight && now - p->last_ns > GUARD_NS)
		p->inflight = 0; /* delivered or dropped long ago, as guard_open rules */
	if (!p) {
		if (!may_record(c, dir, id, now)) {
			uncache(dir, &in->k);
			return;
		}
		id->inflight = 1;
		id->last_ns = now;
		id->gen = gen;
		id->tos = in->tos;
		id->ttl = in->ttl;
		if (!bpf_map_update_elem(pend, &in->k, id, BPF_NOEXIST))
			return;
		p = bpf_map_lookup_elem(pend, &in->k);
		if (!p)
			return;
	}
	/* A new life: none of the flow's packets is on the slow path, so what
	 * the record held describes none that can still reach its end. */
	fresh = !p->inflight;
	if (fresh) {
		p->outer_saddr = id->outer_saddr;
		p->outer_daddr = id->outer_daddr;
		p->vni = id->vni;
		p->port = id->port;
		p->ifindex = id->ifindex;
		p->tos = in->tos;
		p->ttl = in->ttl;
		p->varies = 0;
		p->mixed = 0;
		p->gen = gen;
	} else if (p->gen != gen) {
		/* gen is the generation every packet now in flight was handed
		 * over under; one handed over under another makes it 0 (never
		 * current) until the flow's slow packets have drained. */
		p->gen = 0;
	}
	if (p->tos != in->tos || p->ttl != in->ttl)
		p->varies = 1;
	__sync_fetch_and_add(&p->inflight, segs);
	p->last_ns = now;
	/* Looked at after the atomic add: a packet that began the life and
	 * finds another in flight may have raced one that began it too, each
	 * writing its own identity, so neither can vouch for the record; one
	 * that came later sees the identity the life began with. */
	if (!same_identity(p, id) || (fresh && p->inflight != segs))
		p->mixed = 1;
}

/* segs of the flow's slow packets are past every queue: the guard counts
 * them off. Nothing in flight: the packet did not come the slow way (a
 * fast packet), or came after the guard gave up on it. */
static __always_inline void arrived(void *pend, struct fp_key *k, __u32 segs)
{
	struct fp_pending *p = bpf_map_lookup_elem(pend, k);

	if (p)
		take(p, segs);
}

/* Fast packets pass the programs where the slow path ends too: one
 * redirected to its container's peer passes the container's tc ingress,
 * one redirected to the NIC the NIC's tc egress. Counted there while a
 * packet of their flow is in flight, they would take its place in the
 * count, and it can be in flight: a flow whose sender runs on two CPUs
 * has one CPU hand a packet to the slow path (an invalidation made its
 * entry stale) while the other's fast packet, past the guard a moment
 * before, is on its way. The guard would then open one packet early, and
 * the next fast packet overtake the last slow one. So the fast path marks
 * its packets in the tc control block, which nothing between the two
 * hooks writes, and the ends count only unmarked ones. Another program
 * that overwrote the mark would make the count what it was without it;
 * a slow packet that happened to carry it would hold its flow slow until
 * the guard gives up on it: neither reorders. */
#define FP_FAST_MARK 0xfa57c0deu

static __always_inline void mark_path(struct __sk_buff *skb, int fast)
{
	skb->cb[0] = fast ? FP_FAST_MARK : 0;
}

/* The fast path's verdict on skb, which it delivers: marked. */
static __always_inline long marked_fast(struct __sk_buff *skb, long verdict)
{
	mark_path(skb, 1);
	return verdict;
}

static __always_inline int came_fast(struct __sk_buff *skb)
{
	return skb->cb[0] == FP_FAST_MARK;
}

/* Slow packets that reached a container's end on this CPU and may still be
 * on their way up its stack: a fast packet taking the short way on another
 * CPU could overtake them at the socket. They count as arrived when the
 * NAPI poll that delivered them returns (the stack is done with every skb
 * it handed up) or, a list being at most net.core.gro_normal_batch (8)
 * long, when FP_RING more have come after them. */
#define FP_RING 16

struct fp_ring {
	struct fp_key k[FP_RING];
	__u32 segs[FP_RING];
	__u32 head, n;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_ring);
} fp_arrivals SEC(".maps");

static __always_inline void note_arrival(struct fp_key *k, __u32 segs)
{
	__u32 zero = 0;
	struct fp_ring *r = bpf_map_lookup_elem(&fp_arrivals, &zero);
	__u32 i;

	if (!r)
		return;
	i = r->head & (FP_RING - 1);
	if (r->n >= FP_RING)
		arrived(&fp_pend_in, &r->k[i], r->segs[i]);
	else
		r->n++;
	r->k[i] = *k;
	r->segs[i] = segs;
	r->head++;
}

#endif
