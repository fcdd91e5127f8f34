/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* Types shared between the fast path (fastpath.c) and its Go loader
 * (internal/datapath/fastpath.go). bpf2go turns each struct into a Go type;
 * fields are naturally aligned so both agree without packing. */
#ifndef FALCON_FASTPATH_H
#define FALCON_FASTPATH_H

#include <linux/types.h>

#include "datapath.h" /* MAX_CPUS */

#define FP_FLOWS 65536
#define FP_PORTS 8
#define FP_HDR 64 /* outer Ethernet, IPv4, UDP, VXLAN, inner Ethernet */

/* The inner flow, in network byte order as it is on the wire. */
struct fp_key {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

/* The agent's settings. gen is bumped on every change that could alter
 * what the slow path does (rules, routes, neighbours, links, containers):
 * an entry learned under an older generation is never used. */
struct fp_config {
	__u64 alive_until_ns; /* CLOCK_MONOTONIC: off after this unless renewed */
	/* An entry unused this long is dropped: the host's conntrack may let
	 * the flow's entry expire after it, which only a slow packet renews. */
	__u64 idle_ns;
	__u32 gen;
	__u32 on;
	__u32 nports;
	__u32 decap_flags; /* BPF_F_ADJ_ROOM_DECAP_L3_IPV4 where the kernel has it */
	__u32 ct_gate; /* enum fp_ct_gate's bits: which entries wait for FP_CT_KEPT */
	/* Each tenant's share of a map (docs/fastpath.md#fairness): the
	 * entries it may hold, and the pending records it may begin a second.
	 * A local container (its host-side veth) gets share_veth, a remote
	 * host (an outer source) share_remote. */
	__u32 share_veth;
	__u32 share_remote;
	__u16 ports[FP_PORTS]; /* VXLAN UDP ports, host order */
	/* Sender order (sender-rps): the RPS map the agent set on the
	 * containers' host-side veths, as send_pos[cpu] = index + 1 (0: not in
	 * it), and its size; 0 while it sets none. */
	__u32 send_n;
	__u16 send_pos[MAX_CPUS];
};

/* A flow's packets that took the slow path and are not yet seen where the
 * slow path ends: while any is in flight the flow stays on the slow path,
 * so a fast packet never overtakes a slow one (the ordering guard). The
 * record describes the packets of one life: it begins when a packet is
 * handed over with none of the flow's in flight (docs/fastpath.md). */
struct fp_pending {
	__u64 last_ns;  /* the latest packet handed to the slow path */
	__u32 inflight; /* handed to the slow path, not yet seen at the end */
	__u32 gen;      /* generation when the first of them was handed over */
	/* Where the life's packets came from (the identity an entry binds):
	 * ingress, the outer addresses, VNI and port the NIC saw; egress, the
	 * container's host-side veth. */
	__be32 outer_saddr;
	__be32 outer_daddr;
	__u32 vni;
	__u32 ifindex;
	__u16 port;    /* host order */
	__u8 tos;
	__u8 ttl;
	__u8 varies; /* tos or ttl differed between packets: never cached */
	__u8 mixed;  /* the identity differed between packets: never cached */
	__u8 pad[6];
};

/* Ingress: learned at a container's host-side veth (egress) from a
 * decapsulated packet the host's netfilter had accepted. */
struct fp_ingress {
	__u64 used_ns;
	__u32 gen;
	__u32 ifindex; /* the host-side veth: bpf_redirect_peer's target */
	__be32 remote; /* the outer source that carried it */
	__be32 local;  /* the outer destination */
	__u32 vni;
	__u16 port;
	__u8 eth[14]; /* the Ethernet header the slow path gave it */
	__u8 ttl_dec; /* routed layouts: the slow path decremented the TTL */
	__u8 ct;      /* enum fp_ct */
	__u8 pad[2];
};

/* Egress: learned at the NIC (egress) from the encapsulated packet the slow
 * path built for the flow. */
struct fp_egress {
	__u64 used_ns;
	__u32 gen;
	__u32 nic;     /* where it left */
	__u32 ifindex; /* the container's host-side veth it came from */
	__u8 ttl_dec;
	__u8 ct;  /* enum fp_ct */
	__u8 tos; /* the inner TOS and TTL it was learned from: hdr holds for */
	__u8 ttl; /* packets with that DSCP and TTL ('tos/ttl inherit' devices) */
	__u8 hdr[FP_HDR];
};

/* Whether an entry may be used as far as the host's conntrack goes
 * (docs/fastpath.md#conntrack): a TCP flow's packets skip conntrack's
 * window tracking, so its entry is used only once the agent has made the
 * connection's conntrack entry track both directions liberally, and the
 * packets that take the slow path again are never out of its window. */
enum fp_ct {
	FP_CT_WAIT = 0, /* learned; the agent has not answered yet */
	FP_CT_KEPT = 1,
};

/* fp_config.ct_gate's bits (docs/fastpath.md#conntrack). */
enum fp_ct_gate {
	FP_GATE_TCP = 1, /* the host tracks connections: TCP entries wait */
	/* Every entry waits, UDP's too: the host's rules send new packets to
	 * user space, so the agent lets on only connections conntrack has
	 * ESTABLISHED. */
	FP_GATE_ALL = 2,
};

/* What the learning points ask of the agent: keep conntrack in step with
 * the flow of key k, learned into dir's map under generation gen. */
struct fp_ct_event {
	struct fp_key k;
	__u32 dir; /* FP_DIR_IN or FP_DIR_EG */
	__u32 gen;
};

/* Who a cache entry or pending record is charged to: a local container by
 * its host-side veth, or a remote host by the outer source of its VXLAN
 * packets. Neither can be chosen by a container: the veth is where its
 * packets come in or go out, and the outer source is written by the remote
 * host's VXLAN device. */
enum fp_tenant_kind {
	FP_TENANT_VETH = 1,
	FP_TENANT_REMOTE = 2,
};

struct fp_tenant {
	__u32 id; /* the veth's ifindex, or the outer source (network order) */
	__u32 kind; /* enum fp_tenant_kind */
};

/* What a tenant holds. entries is kept by the programs as they add and
 * remove, and recounted by the agent when it ages the caches (an LRU
 * eviction or a race leaves it off until then). */
struct fp_share {
	__u64 since_ns;  /* when the current second of new pending records began */
	__u32 pending;   /* pending records begun since then */
	__s32 entries;   /* cache entries held, both directions */
};

enum fp_counter {
	FP_IN_HIT = 0,
	FP_IN_MISS,
	FP_EG_HIT,
	FP_EG_MISS,
	FP_IN_LEARN,
	FP_EG_LEARN,
	FP_SEND_MOVED,  /* sent on another CPU than its flow's home: queued on the home's backlog */
	FP_GUARD_WAIT,  /* cached, but the flow's slow packets were still in flight */
	FP_STALE,       /* cached under an older generation */
	FP_SPOOF,       /* VNI, outer source or destination, or veth not as learned (or mixed while learning) */
	FP_CHANGED,     /* the slow path changed the packet beyond TTL: never cached */
	FP_CONTROL,     /* TCP SYN, FIN or RST: always the slow path */
	FP_NOT_ELIGIBLE, /* not IPv4 TCP/UDP, IP options, a fragment; headers the kernel would
			  * refuse or rewrite otherwise (docs/fastpath.md) */
	FP_HELPER_FAIL, /* a helper refused the packet: it took the slow path */
	FP_CT_WAITING,  /* cached flow whose conntrack entry the agent has not kept yet */
	FP_IDLE,        /* cached, but unused for longer than conntrack may keep the flow */
	FP_SHARE_PENDING, /* no pending record begun: its tenant began its share of them this second */
	FP_SHARE_ENTRY,   /* not learned: its tenant holds its share of entries */
	FP_CSUM_AGGREGATE, /* an aggregate the slow path sends with an outer UDP checksum, which
			    * the fast path cannot give its segments (fastpath_gso.h) */
	FP_CNT_MAX,
};

/* A flow's home on the sending host (fastpath_order.h): the CPU whose
 * backlog its packets wait on. */
struct fp_home {
	__u64 last_ns; /* the latest packet, to a second (touch) */
	__u32 cpu;
	__u32 pad;
};

#endif
