/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* Each tenant's share of the fast path's maps (docs/fastpath.md#fairness):
 * a local container (its host-side veth) or a remote host (an outer
 * source) may hold so many cache entries and begin so many pending records
 * a second; past that its new flows stay on the slow path, where they were
 * anyway, and no one else's entry or record makes room for them. Included
 * by fastpath.c after its maps and count(). */
#ifndef FALCON_FASTPATH_SHARE_H
#define FALCON_FASTPATH_SHARE_H

/* More than containers and remote hosts a node has. LRU: a flood of forged
 * outer sources from the underlay can only evict tenants' tallies, which
 * lets those tenants past their share until the agent recounts. */
#define FP_TENANTS 16384
#define SHARE_WINDOW_NS 1000000000ULL /* GUARD_NS: a pending record lives this long */

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FP_TENANTS);
	__type(key, struct fp_tenant);
	__type(value, struct fp_share);
} fp_shares SEC(".maps");

static __always_inline struct fp_share *tenant(__u32 kind, __u32 id, int create)
{
	struct fp_tenant t = {.id = id, .kind = kind};
	struct fp_share zero = {};
	struct fp_share *s = bpf_map_lookup_elem(&fp_shares, &t);

	if (s || !create)
		return s;
	bpf_map_update_elem(&fp_shares, &t, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&fp_shares, &t);
}

static __always_inline __u32 share_of(struct fp_config *c, __u32 kind)
{
	return kind == FP_TENANT_REMOTE ? c->share_remote : c->share_veth;
}

/* May the tenant begin a pending record for a new flow? At most its share
 * in a second: a record matters for a second after its flow's last slow
 * packet (GUARD_NS), so however many a tenant begins, it cannot push the
 * map's other live records out (the map holds FP_FLOWS, a share is a
 * sixteenth or a quarter of it). */
static __always_inline int may_begin(struct fp_config *c, __u32 kind, __u32 id, __u64 now)
{
	struct fp_share *s = tenant(kind, id, 1);

	if (!s)
		return 1; /* its tally was just evicted: as without shares */
	if (now - s->since_ns > SHARE_WINDOW_NS) {
		s->since_ns = now;
		s->pending = 0;
	}
	if (s->pending >= share_of(c, kind)) {
		count(FP_SHARE_PENDING);
		return 0;
	}
	__sync_fetch_and_add(&s->pending, 1);
	return 1;
}

/* May the tenant hold one more entry? */
static __always_inline int may_hold(struct fp_config *c, __u32 kind, __u32 id)
{
	struct fp_share *s = tenant(kind, id, 0);

	return !s || s->entries < (__s32)share_of(c, kind);
}

/* The tenant holds n more entries (n: 1 or -1). */
static __always_inline void hold(__u32 kind, __u32 id, int n)
{
	struct fp_share *s = tenant(kind, id, n > 0);

	if (s)
		__sync_fetch_and_add(&s->entries, n);
}

/* May entry e replace old (0: none) in fp_in? It is charged to the
 * container it is delivered to and to the remote host that sent it: a new
 * entry, or one that changes hands, needs room in both their shares;
 * relearning one's own (after an invalidation) never does. */
static __always_inline int take_in(struct fp_config *c, struct fp_ingress *old, struct fp_ingress *e)
{
	if (old && old->ifindex == e->ifindex && old->remote == e->remote)
		return 1;
	if (!may_hold(c, FP_TENANT_VETH, e->ifindex) || !may_hold(c, FP_TENANT_REMOTE, e->remote)) {
		count(FP_SHARE_ENTRY);
		return 0;
	}
	hold(FP_TENANT_VETH, e->ifindex, 1);
	hold(FP_TENANT_REMOTE, e->remote, 1);
	if (old) {
		hold(FP_TENANT_VETH, old->ifindex, -1);
		hold(FP_TENANT_REMOTE, old->remote, -1);
	}
	return 1;
}

/* take_in for fp_eg: charged to the container that sent it. */
static __always_inline int take_eg(struct fp_config *c, struct fp_egress *old, struct fp_egress *e)
{
	if (old && old->ifindex == e->ifindex)
		return 1;
	if (!may_hold(c, FP_TENANT_VETH, e->ifindex)) {
		count(FP_SHARE_ENTRY);
		return 0;
	}
	hold(FP_TENANT_VETH, e->ifindex, 1);
	if (old)
		hold(FP_TENANT_VETH, old->ifindex, -1);
	return 1;
}

/* Removes k's entry e from fp_in or fp_eg, and its tenants' tallies. */
static __always_inline void forget_in(struct fp_key *k, struct fp_ingress *e)
{
	__u32 ifindex = e->ifindex;
	__be32 remote = e->remote;

	if (!bpf_map_delete_elem(&fp_in, k)) {
		hold(FP_TENANT_VETH, ifindex, -1);
		hold(FP_TENANT_REMOTE, remote, -1);
	}
}

static __always_inline void forget_eg(struct fp_key *k, struct fp_egress *e)
{
	__u32 ifindex = e->ifindex;

	if (!bpf_map_delete_elem(&fp_eg, k))
		hold(FP_TENANT_VETH, ifindex, -1);
}

#endif
