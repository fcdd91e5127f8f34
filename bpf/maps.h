/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* The maps every falcon program shares, and each instance's identity. The
 * tc program (falcon.c) and the XDP program (split.c) are separate objects;
 * both declare these maps from this one header, and the loader hands every
 * instance the same kernel maps (internal/datapath). */
#ifndef FALCON_MAPS_H
#define FALCON_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "datapath.h"

/* Each attachment loads its own instance with its slot in the hooks map, so
 * hooks on equal ifindexes in different namespaces never share state. */
const volatile __u32 hook_id = 0;
const volatile __u32 debug_on = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} falcon_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct load);
} falcon_load SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_HOOKS);
	__type(key, __u32);
	__type(value, struct hook);
} falcon_hooks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_HOOKS);
	__type(key, __u32);
	__type(value, struct counters);
} falcon_counters SEC(".maps");

/* Steered packets to CPUs >= STEER_SLOTS. Sparse (hooks x |S| entries in
 * use), so not preallocated: a dense per-CPU array of MAX_HOOKS x MAX_CPUS
 * would cost megabytes per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct steer_key);
	__type(value, __u64);
} falcon_steered SEC(".maps");

/* Shared values, written in place: one (flow, device) arrives on the previous
 * stage's CPU, which is stable, so writers rarely meet; per-CPU values would
 * multiply the memory by the number of CPUs. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FLOWLET_ENTRIES);
	__type(key, struct flowlet_key);
	__type(value, struct flowlet);
} falcon_flowlets SEC(".maps");

/* Segments of a flow, by flow hash, that reached the last stage or were
 * dropped on the way (guard.c), by done_slot, per CPU: each CPU counts its
 * own, so the counts cost no shared cache line; a hook that wants to move
 * the flow sums them. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, FLOWLET_ENTRIES);
	__type(key, __u32);
	__type(value, struct done);
} falcon_done SEC(".maps");

/* Micro-flow state of the flows the split hook saw (mflow.h); the tc
 * hooks read whether a flow is an elephant. Shared: one flow's frames
 * arrive on one interrupt CPU at a time. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FLOWLET_ENTRIES);
	__type(key, __u32);
	__type(value, struct mflow);
} falcon_mflow SEC(".maps");

/* The devices the guard counts at, written by the agent. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct stage_dev);
	__type(value, __u32); /* enum stage_kind */
} falcon_stages SEC(".maps");

/* The split NICs, by device, for the guard's NAPI poll program (guard.c). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_HOOKS);
	__type(key, struct stage_dev);
	__type(value, struct split_dev);
} falcon_split_devs SEC(".maps");

/* Per split hook: its frames' metadata and GRO (split.c). Not per CPU:
 * GRO's state belongs to the NAPI instance, which moves between CPUs. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_HOOKS);
	__type(key, __u32);
	__type(value, struct gro_state);
} falcon_gro SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct debug);
} falcon_debug SEC(".maps");

/* Written only when the program is loaded with debug_on (tests). */
static __always_inline void record(__u32 fh, __u32 kind, __u32 target, __u32 hit, __u32 set_hash,
				   __u32 skb_hash, __u32 action)
{
	__u32 zero = 0;
	struct debug *d;

	if (!debug_on)
		return;
	d = bpf_map_lookup_elem(&falcon_debug, &zero);
	if (!d)
		return;
	d->flowhash = fh;
	d->kind = kind;
	d->target = target;
	d->set_hash = set_hash;
	d->skb_hash = skb_hash;
	d->hit = hit;
	d->action = action;
	d->cur = bpf_get_smp_processor_id();
	d->seq++;
}

#endif
