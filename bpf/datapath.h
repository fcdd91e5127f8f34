/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* Types and limits shared by the datapath's programs (falcon.c, split.c,
 * guard.c) and their Go loader (internal/datapath).
 * bpf2go turns every struct here into a Go type; keep fields naturally
 * aligned so C and Go agree on the layout without packing tricks. */
#ifndef FALCON_DATAPATH_H
#define FALCON_DATAPATH_H

#include <linux/types.h>

#define MAX_CPUS 1024   /* highest CPU id + 1, and the largest Falcon CPU set */
#define MAX_PORTS 8     /* VXLAN UDP ports recognised at a NIC hook */
#define MAX_HOOKS 128   /* attachment points of one datapath */
#define STEER_SLOTS 64  /* CPUs < this count their steered packets in struct counters */
#define FLOWLET_ENTRIES 65536

enum role {
	ROLE_NIC = 1,     /* packets are VXLAN-encapsulated; steer the VXLAN device's stage */
	ROLE_OVERLAY = 2, /* packets are decapsulated; steer the container's stage */
	ROLE_SPLIT = 3,   /* XDP on the NIC: choose the CPU that builds the NIC stage's skbs */
};

enum policy {
	POLICY_ADAPTIVE = 0, /* steer only where it relieves a busy CPU, and only while engaged */
	POLICY_PAPER = 1,    /* FALCON's Algorithm 1, unconditionally */
	POLICY_STATIC = 2,   /* Algorithm 1 without its second choice (FALCON Fig. 16's "static") */
};

enum stage_kind {
	STAGE_PATH = 0, /* on the way (a VXLAN device): count only what its backlog drops */
	STAGE_LAST = 1, /* the last stage (a container's end): count every arrival */
};

enum fallback {
	FALLBACK_INLINE = 0, /* hash 0: no RPS, the next stage runs where this one did */
	FALLBACK_LOCAL = 1,  /* aim RPS at the current CPU (a backlog hop on the same CPU) */
};

/* One slot per outcome; every packet a hook sees lands in exactly one, so
 * the per-CPU sum of a hook's slots is where that stage ran. */
enum counter {
	CNT_FIRST = 0,
	CNT_SECOND,
	CNT_FALLBACK_LOAD,  /* average load of S >= threshold */
	CNT_FALLBACK_STALE, /* load data older than stale_ns */
	CNT_FLOWLET_HIT,    /* the (flow, device) kept its previous decision */
	CNT_FALLBACK_IDLE,  /* adaptive: inline, moving would relieve no busy CPU (or not engaged) */
	CNT_GUARD_HOLD,     /* a wanted move waited: packets sent to the old target were still queued */
	CNT_PASS_NON_IP,
	CNT_PASS_FRAGMENT,
	CNT_PASS_TRUNCATED,
	CNT_PASS_MALFORMED,
	CNT_PASS_NOT_VXLAN, /* NIC hook: not UDP to a configured VXLAN port */
	CNT_PASS_DISABLED,  /* no CPU set configured or hook inactive */
	CNT_PASS_PROTO,     /* split hook: inner protocol not split (--split-proto) */
	CNT_MFLOW,          /* a packet of an elephant split into micro-flows (mflow.h): no per-flow choice */
	CNT_MAX,
};

/* Decision kinds recorded in the debug map and flowlet entries. */
enum kind {
	KIND_NONE = 0,
	KIND_FIRST = 1,
	KIND_SECOND = 2,
	KIND_FALLBACK = 3,
};

#define TARGET_FALLBACK 0xffffffffu

struct config {
	__u32 n;         /* |S|; 0 = steering off, every packet passes */
	__u32 threshold; /* load percent */
	__u64 recheck_ns;       /* a kept decision is reconsidered after this long */
	__u64 stale_ns;         /* 0 = load data never stale */
	__u64 guard_timeout_ns; /* a flow idle this long has no packet left in any queue */
	__u32 per_packet;
	__u32 fallback; /* enum fallback */
	__u32 policy;   /* enum policy */
	__u32 always_on; /* never inline for the set's average load (FALCON Fig. 15's "always-on") */
	__u32 engaged;  /* adaptive: the agent measured that steering pays */
	__u32 ncpus;    /* possible CPUs: the guard sums per-CPU counts below this */
	__u32 drain;    /* the agent is stopping: every flow goes inline, under its guard */
	__u32 unmark;   /* drained: the split program stops marking, so that its detach changes no frame's metadata (split.c) */
	__u32 stood_down; /* every program detached: steering did not pay, or nothing to relieve (for status) */
	__u32 epoch;      /* 1..MARK_EPOCH: a hook's mark counts only while it is current (guard.c) */
	__u32 nports;
	__u16 ports[MAX_PORTS]; /* host byte order */
	__u32 cpus[MAX_CPUS];    /* S, ascending, as RPS lists a mask's CPUs */
	__u16 pos[MAX_CPUS];     /* pos[cpu] = index in S + 1, 0 = not in S */
	/* The split set: CPUs whose cpumap kthread may build the NIC stage's
	 * skbs (split.c), ascending; split_n 0 = no splitting. */
	__u32 split_n;
	__u32 split_proto; /* inner IP protocol split; 0 = all */
	/* MFLOW (mflow.h): an elephant's packets go to the split CPUs in
	 * turns of batch packets; 0 = no micro-flows. A flow is an elephant
	 * while it brings elephant_bytes or more in MFLOW_WINDOW_NS (0: every
	 * flow). UDP flows are split only with reorder_udp: UDP has no
	 * out-of-order queue. */
	__u32 batch;
	__u32 elephant_bytes;
	__u32 reorder_udp;
	__u32 split_cpus[MAX_CPUS];
};

struct load {
	__u64 updated_ns; /* CLOCK_MONOTONIC of the sample, 0 = never */
	__u32 avg;        /* average load of S, percent */
	__u32 split_avg;  /* average load of the split set, percent */
	__u32 pct[MAX_CPUS]; /* per CPU id, percent (EWMA) */
};

struct hook {
	__u32 ifindex;
	__u32 next_ifindex; /* the salt: stage identity of the next device */
	__u32 role;         /* enum role */
	__u32 active;
	__u32 egress;
	__u32 marks;       /* split: the NIC's tc hook carries this program's mark to the last stage */
	__u32 host_nic;    /* a NIC of the host network itself: its packets come unencapsulated */
	__u64 netns_ino;   /* for display by another process */
	__u64 attached_ns; /* CLOCK_MONOTONIC of the attach: older packets of a flow may still be queued */
	char name[16];
	/* a name under /run/netns or a path: Docker's sandboxes live under its
	 * exec root (EXEC_ROOT/netns/1-<network>), which may be long */
	char netns[256];
};

struct counters {
	__u64 c[CNT_MAX];
	__u64 bytes;    /* of every overlay packet the hook decided on: the agent's engagement test */
	__u64 moved;    /* (flow, hook)s that changed their target */
	__u64 timeouts; /* ... of them after the guard gave up on lost packets */
	__u64 batches;  /* split hook: micro-flows started (mflow.h) */
	/* Packets whose next stage was sent to CPU i (< STEER_SLOTS): the
	 * counter sits in the line the program already touches, where a hash
	 * map lookup would cost a quarter of the program. Higher CPUs count in
	 * the falcon_steered map. */
	__u64 to[STEER_SLOTS];
};

/* What a tc hook writes into skb->tc_index, for the last stage to count
 * the packet against that hook's role (guard.c): MARK_SIG, the roles of
 * the hooks that counted it in their sent, and the datapath's epoch. The
 * guard then counts exactly the packets the hooks counted: packets that
 * passed before a hook existed carry no mark (or an old epoch's) and are
 * no longer confused with its own. tc_index survives decapsulation, the
 * bridge and veth (skb_scrub_packet keeps it; priority does not survive);
 * the last stage clears it. */
#define MARK_SIG 0xa000
#define MARK_SIG_MASK 0xf000
#define MARK_NIC 0x0800
#define MARK_OVERLAY 0x0400
#define MARK_SPLIT 0x0200 /* the split program counted it: carried from XDP metadata by the NIC's tc hook */
#define MARK_EPOCH 0x01ff

/* Per flow, what arrived at the last stage or was dropped on the way: all
 * of it (a split hook that cannot mark counts against this), and what
 * carried each hook role's mark of the current epoch. */
enum done_slot {
	DONE_ALL = 0,
	DONE_NIC = 1,
	DONE_OVERLAY = 2,
	DONE_SPLIT = 3,
	DONE_SLOTS = 4,
};

struct done {
	__u64 c[DONE_SLOTS];
	/* When this CPU last counted one of the flow's segments (any slot):
	 * while they still arrive, the flow's queues are moving, and the
	 * guard does not take its missing segments for lost. */
	__u64 last_ns;
};

struct flowlet_key {
	__u32 flowhash;
	__u32 hook;
};

/* One (flow, hook)'s decision and its ordering guard. sent counts the
 * segments the hook passed on, steered or inline; the last stage's receive
 * counts them again in falcon_done (guard.c). The decision may change only
 * when base + sent == done: nothing of the flow is still queued anywhere
 * between this hook and the last stage. */
struct flowlet {
	__u32 target; /* index in S, or TARGET_FALLBACK */
	__u32 cpu;    /* S[target] when it was chosen; detects a changed S */
	__u32 kind;   /* enum kind of the decision */
	__u32 unsure; /* split hooks: made while packets from before the hook may be queued */
	__u64 last_seen_ns;
	__u64 next_check_ns; /* the decision is kept until then */
	__u64 sent;
	__u64 base; /* done's sum when the entry was made (or resynchronised) */
};

/* A device on the overlay's receive path the guard counts at (falcon_stages). */
struct stage_dev {
	__u32 netns_ino;
	__u32 ifindex;
};

struct steer_key {
	__u32 hook;
	__u32 cpu;
};

/* Written only when the program is loaded with debug set (tests). */
struct debug {
	__u32 flowhash;
	__u32 kind;      /* enum kind; KIND_NONE = passed */
	__u32 target;    /* CPU the next stage was aimed at */
	__u32 set_hash;  /* value given to bpf_set_hash */
	__u32 skb_hash;  /* skb->hash read back afterwards */
	__u32 hit;       /* decided by a flowlet entry */
	__u32 action;    /* the program's verdict */
	__u32 cur;       /* the CPU the program ran on */
	__u64 seq;       /* packets seen with debug on */
};

/* One flow's micro-flow state at the split hook (mflow.h), by flow hash. */
struct mflow {
	__u64 win_start_ns; /* the rate window began */
	__u64 win_bytes;    /* bytes seen in it */
	__u64 left;         /* packets left in the current micro-flow */
	__u64 split;        /* packets sent in micro-flows */
	__u32 elephant;     /* windows in a row at the elephant rate, up to MFLOW_ELEPHANT_WINDOWS */
	__u32 idx;          /* the current micro-flow's index in the split set */
};

/* A split NIC, by device (falcon_split_devs): the hook that splits it, and
 * how long GRO may still hold a frame after a NAPI poll of it returned,
 * when the poll finished its work (gro_flush_timeout) and when it ran out
 * of budget (a jiffy on kernels with HZ >= 1000, which flush only older
 * frames then; 0 below). */
struct split_dev {
	__u32 hook;
	__u32 pad;
	__u64 hold_done_ns;
	__u64 hold_busy_ns;
};

/* Per split hook (falcon_gro): whether the split program writes metadata
 * into the frames of the NIC's NAPI, when it last polled one (once it
 * polled one since the attach: seen), and the time before which every
 * frame polled has left GRO. One state per hook, as the NIC has one NAPI
 * (a veth wire's single queue): GRO is the NAPI's, wherever it runs. A NIC
 * of several queues has a NAPI, and a GRO, per queue, which this state
 * lumps together (falcon's testbeds have none; open). */
struct gro_state {
	__u64 flushed_ns;
	__u64 last_ns;
	__u32 meta;
	__u32 seen;
};

/* One CPU's cpumap traffic (split.c), indexed by CPU id. The enqueue half
 * is written by the CPUs that redirect to it, the kthread half by the CPU
 * itself: one cache line each. */
struct split_stats {
	__u64 enqueued;      /* frames put on this CPU's cpumap queue */
	__u64 enqueue_drops; /* frames its full queue refused (dropped) */
	__u64 bulks;         /* bulk flushes into its queue */
	__u64 redirect_fail; /* redirects that found no cpumap entry (passed) */
	__u64 redirected;    /* frames redirected to this CPU's queue, and ... */
	__u64 full;          /* ... frames the split program dropped instead: its queue might have been full */
	__u64 full_inline;   /* micro-flow frames built on the interrupt CPU instead: the queue might have been full */
	__u64 pad1;
	__u64 built;         /* frames its kthread turned into skbs */
	__u64 build_drops;   /* frames its kthread dropped (skb allocation) */
	__u64 batches;       /* kthread rounds that found frames */
	__u64 sleeps;        /* times the kthread slept or yielded */
	__u64 consumed;      /* frames its kthread took off the queue */
	__u64 pad2[3];
};

#endif
