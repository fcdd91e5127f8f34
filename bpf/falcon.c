// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/* falcon: FALCON's softirq pipelining on an unmodified kernel.
 *
 * Attached at tc of one device, the program decides on which CPU the NEXT
 * device's stage runs: it sets skb->hash with bpf_set_hash() so that the next
 * device's RPS map (rps_cpus = the Falcon CPU set S, set by user space) picks
 * the CPU that FALCON's Algorithm 1 chose. An L4 hash survives VXLAN
 * decapsulation, the bridge and veth, so a NIC hook steers the VXLAN device's
 * stage and an overlay hook steers the container's stage.
 *
 * The Go twin of every function that decides something is internal/steer;
 * keep the two identical (a test compares them on random flows). */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "falcon.h"

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

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct debug);
} falcon_debug SEC(".maps");

#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88A8

#define PROTO_HOPOPTS 0
#define PROTO_TCP 6
#define PROTO_UDP 17
#define PROTO_ROUTING 43
#define PROTO_FRAGMENT 44
#define PROTO_AH 51
#define PROTO_DSTOPTS 60

#define VXLAN_HLEN 8
#define VXLAN_FLAG_VNI 0x08
#define IPV6_MAX_EXT 4

#define CPU_MASK (MAX_CPUS - 1)

/* An index into cpus[]/pos[] the verifier can bound. The empty asm hides the
 * value from clang, which would otherwise drop a mask it can prove is a no-op
 * (x < n <= MAX_CPUS), a fact the verifier cannot see through % or loads. */
static __always_inline __u32 cpu_idx(__u32 x)
{
	asm volatile("" : "+r"(x));
	return x & CPU_MASK;
}

struct flow {
	__u32 src[4];
	__u32 dst[4];
	__u32 ports; /* sport << 16 | dport, host order */
	__u32 proto;
	__u32 v6;
};

struct iphdr4 {
	__u8 ver_ihl;
	__u8 tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__be16 check;
	__be32 saddr;
	__be32 daddr;
};

struct iphdr6 {
	__be32 ver_tc_fl;
	__be16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	__be32 saddr[4];
	__be32 daddr[4];
};

struct udphdr_ {
	__be16 source;
	__be16 dest;
	__be16 len;
	__be16 check;
};

/* Headers deeper than this are read with bpf_skb_load_bytes() only; it keeps
 * the offsets the verifier sees bounded. */
#define MAX_DIRECT_OFF 256

/* Copies len bytes at off into dst: straight from the linear data when they
 * are there (the usual case: GRO pulled every header it parsed, inner ones
 * included), else through bpf_skb_load_bytes(), which also reads paged
 * data. Packet loads may be unaligned on the targets falcon runs on; the
 * alignment hint only lets clang copy in words rather than bytes. */
static __always_inline int load(struct __sk_buff *skb, __u32 off, void *dst, __u32 len)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	void *p;

	if (off <= MAX_DIRECT_OFF) {
		p = data + off;
		if (p + len <= end) {
			__builtin_memcpy(dst, __builtin_assume_aligned(p, 2), len);
			return 0;
		}
	}
	return bpf_skb_load_bytes(skb, off, dst, len);
}

/* Returns 0 or a CNT_PASS_* reason; *off moves past the Ethernet header and
 * at most one VLAN tag (tc usually sees tags already moved to skb metadata). */
static __always_inline int parse_eth(struct __sk_buff *skb, __u32 *off, __u16 *proto)
{
	__be16 p;

	if (load(skb, *off + 12, &p, sizeof(p)))
		return CNT_PASS_TRUNCATED;
	*off += ETH_HLEN;
	*proto = bpf_ntohs(p);
	if (*proto == ETH_P_8021Q || *proto == ETH_P_8021AD) {
		if (load(skb, *off + 2, &p, sizeof(p)))
			return CNT_PASS_TRUNCATED;
		*off += 4;
		*proto = bpf_ntohs(p);
	}
	if (*proto != ETH_P_IP && *proto != ETH_P_IPV6)
		return CNT_PASS_NON_IP;
	return 0;
}

static __always_inline int parse_ip4(struct __sk_buff *skb, __u32 *off, struct flow *fl)
{
	struct iphdr4 ip;
	__u32 ihl;

	if (load(skb, *off, &ip, sizeof(ip)))
		return CNT_PASS_TRUNCATED;
	if ((ip.ver_ihl >> 4) != 4)
		return CNT_PASS_MALFORMED;
	ihl = (ip.ver_ihl & 0x0f) * 4;
	if (ihl < sizeof(ip))
		return CNT_PASS_MALFORMED;
	/* Any fragment, the first included: later ones carry no ports, and a
	 * flow must take one path. */
	if (bpf_ntohs(ip.frag_off) & 0x3fff)
		return CNT_PASS_FRAGMENT;
	if (*off + ihl > skb->len)
		return CNT_PASS_TRUNCATED;
	fl->src[0] = bpf_ntohl(ip.saddr);
	fl->dst[0] = bpf_ntohl(ip.daddr);
	fl->proto = ip.protocol;
	fl->v6 = 0;
	*off += ihl;
	return 0;
}

static __always_inline int parse_ip6(struct __sk_buff *skb, __u32 *off, struct flow *fl)
{
	struct iphdr6 ip;
	__u8 ext[2];
	__u32 nh;
	int i;

	if (load(skb, *off, &ip, sizeof(ip)))
		return CNT_PASS_TRUNCATED;
	if ((bpf_ntohl(ip.ver_tc_fl) >> 28) != 6)
		return CNT_PASS_MALFORMED;
	*off += sizeof(ip);
	nh = ip.nexthdr;
#pragma unroll
	for (i = 0; i < IPV6_MAX_EXT; i++) {
		if (nh == PROTO_FRAGMENT)
			return CNT_PASS_FRAGMENT;
		if (nh != PROTO_HOPOPTS && nh != PROTO_ROUTING && nh != PROTO_DSTOPTS && nh != PROTO_AH)
			break;
		if (load(skb, *off, ext, sizeof(ext)))
			return CNT_PASS_TRUNCATED;
		*off += nh == PROTO_AH ? ((__u32)ext[1] + 2) * 4 : ((__u32)ext[1] + 1) * 8;
		nh = ext[0];
	}
	if (nh == PROTO_FRAGMENT)
		return CNT_PASS_FRAGMENT;
	if (nh == PROTO_HOPOPTS || nh == PROTO_ROUTING || nh == PROTO_DSTOPTS || nh == PROTO_AH)
		return CNT_PASS_MALFORMED;
	if (*off > skb->len)
		return CNT_PASS_TRUNCATED;
#pragma unroll
	for (i = 0; i < 4; i++) {
		fl->src[i] = bpf_ntohl(ip.saddr[i]);
		fl->dst[i] = bpf_ntohl(ip.daddr[i]);
	}
	fl->proto = nh;
	fl->v6 = 1;
	return 0;
}

static __always_inline int parse_l3(struct __sk_buff *skb, __u32 *off, __u16 proto, struct flow *fl)
{
	if (proto == ETH_P_IP)
		return parse_ip4(skb, off, fl);
	return parse_ip6(skb, off, fl);
}

/* Ports of TCP and UDP; other IP protocols are one flow per address pair. */
static __always_inline int parse_l4(struct __sk_buff *skb, __u32 off, struct flow *fl)
{
	__be16 ports[2];
	__u32 need;

	if (fl->proto == PROTO_TCP)
		need = 20;
	else if (fl->proto == PROTO_UDP)
		need = 8;
	else
		return 0;
	if (off + need > skb->len)
		return CNT_PASS_TRUNCATED;
	if (load(skb, off, ports, sizeof(ports)))
		return CNT_PASS_TRUNCATED;
	fl->ports = (__u32)bpf_ntohs(ports[0]) << 16 | bpf_ntohs(ports[1]);
	return 0;
}

static __always_inline int vxlan_port(struct config *cfg, __u16 port)
{
	int i;

#pragma unroll
	for (i = 0; i < MAX_PORTS; i++)
		if (i < cfg->nports && cfg->ports[i] == port)
			return 1;
	return 0;
}

/* Past outer Ethernet/IP/UDP and the VXLAN header: *off is the inner frame. */
static __always_inline int parse_outer(struct __sk_buff *skb, struct config *cfg, __u32 *off)
{
	struct flow outer = {};
	struct udphdr_ udp;
	__u8 vx[VXLAN_HLEN];
	__u16 proto;
	int r;

	r = parse_eth(skb, off, &proto);
	if (r)
		return r;
	r = parse_l3(skb, off, proto, &outer);
	if (r)
		return r;
	if (outer.proto != PROTO_UDP)
		return CNT_PASS_NOT_VXLAN;
	if (load(skb, *off, &udp, sizeof(udp)))
		return CNT_PASS_TRUNCATED;
	if (!vxlan_port(cfg, bpf_ntohs(udp.dest)))
		return CNT_PASS_NOT_VXLAN;
	*off += sizeof(udp);
	if (load(skb, *off, vx, sizeof(vx)))
		return CNT_PASS_TRUNCATED;
	if (!(vx[0] & VXLAN_FLAG_VNI))
		return CNT_PASS_MALFORMED;
	*off += VXLAN_HLEN;
	return 0;
}

static __always_inline int parse(struct __sk_buff *skb, __u32 role, struct config *cfg, struct flow *fl)
{
	__u32 off = 0;
	__u16 proto;
	int r;

	if (role == ROLE_NIC) {
		r = parse_outer(skb, cfg, &off);
		if (r)
			return r;
	}
	r = parse_eth(skb, &off, &proto);
	if (r)
		return r;
	r = parse_l3(skb, &off, proto, fl);
	if (r)
		return r;
	return parse_l4(skb, off, fl);
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

/* FALCON's Algorithm 1. Returns an index into S or TARGET_FALLBACK, and the
 * counter that names the decision. */
static __always_inline __u32 choose(struct config *cfg, struct load *ld, __u32 fh, __u32 salt,
				    __u64 now, __u32 n, int *why)
{
	__u32 h1, h2, i, c;

	if (cfg->stale_ns &&
	    (ld->updated_ns == 0 || ((__s64)(now - ld->updated_ns) > 0 && now - ld->updated_ns > cfg->stale_ns))) {
		*why = CNT_FALLBACK_STALE;
		return TARGET_FALLBACK;
	}
	if (ld->avg >= cfg->threshold) {
		*why = CNT_FALLBACK_LOAD;
		return TARGET_FALLBACK;
	}
	h1 = hash32(fh + salt);
	i = cpu_idx(h1 % n);
	c = cfg->cpus[i];
	if (c < MAX_CPUS && ld->pct[c] < cfg->threshold) {
		*why = CNT_FIRST;
		return i;
	}
	h2 = hash32(h1);
	*why = CNT_SECOND;
	return cpu_idx(h2 % n);
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

static __always_inline void record(struct __sk_buff *skb, __u32 fh, __u32 kind, __u32 target, __u32 h, __u32 hit)
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
	d->set_hash = h;
	d->skb_hash = skb->hash;
	d->hit = hit;
	d->seq++;
}

/* TC_ACT_UNSPEC (TCX_NEXT) rather than TC_ACT_OK: the packet passes either
 * way, but UNSPEC lets other programs on the device (Cilium, Calico eBPF)
 * still run after ours. */
#define PASS TC_ACT_UNSPEC

SEC("tc")
int falcon_steer(struct __sk_buff *skb)
{
	__u32 zero = 0, hid = hook_id, n, fh, target, dest, cur, h, kind, hit = 0;
	struct flowlet_key fk = {};
	struct flowlet *fe = NULL;
	struct counters *cnt;
	struct config *cfg;
	struct hook *hk;
	struct load *ld;
	struct flow fl = {};
	__u64 now;
	int why;

	cnt = bpf_map_lookup_elem(&falcon_counters, &hid);
	hk = bpf_map_lookup_elem(&falcon_hooks, &hid);
	cfg = bpf_map_lookup_elem(&falcon_config, &zero);
	ld = bpf_map_lookup_elem(&falcon_load, &zero);
	if (!cnt || !hk || !cfg || !ld)
		return PASS;

	n = cfg->n;
	if (!hk->active || n == 0 || n > MAX_CPUS) {
		cnt->c[CNT_PASS_DISABLED]++;
		record(skb, 0, KIND_NONE, 0, 0, 0);
		return PASS;
	}
	why = parse(skb, hk->role, cfg, &fl);
	if (why) {
		if (why > 0 && why < CNT_MAX)
			cnt->c[why]++;
		record(skb, 0, KIND_NONE, 0, 0, 0);
		return PASS;
	}

	fh = flow_hash(&fl);
	now = bpf_ktime_get_ns();
	cur = bpf_get_smp_processor_id();

	if (!cfg->per_packet) {
		fk.flowhash = fh;
		fk.hook = hid;
		fe = bpf_map_lookup_elem(&falcon_flowlets, &fk);
		if (fe && (__s64)(now - fe->last_seen_ns) <= (__s64)cfg->flowlet_gap_ns &&
		    (fe->target == TARGET_FALLBACK ||
		     (fe->target < n && cfg->cpus[cpu_idx(fe->target)] == fe->cpu))) {
			fe->last_seen_ns = now;
			target = fe->target;
			kind = fe->kind;
			hit = 1;
		}
	}
	if (hit) {
		why = CNT_FLOWLET_HIT;
	} else {
		target = choose(cfg, ld, fh, hk->next_ifindex, now, n, &why);
		kind = target == TARGET_FALLBACK ? KIND_FALLBACK : (why == CNT_SECOND ? KIND_SECOND : KIND_FIRST);
		if (!cfg->per_packet) {
			struct flowlet v = {
				.target = target,
				.cpu = target == TARGET_FALLBACK ? 0 : cfg->cpus[cpu_idx(target)],
				.kind = kind,
				.last_seen_ns = now,
			};
			if (fe)
				*fe = v;
			else
				bpf_map_update_elem(&falcon_flowlets, &fk, &v, BPF_ANY);
		}
	}
	if (why >= 0 && why < CNT_MAX)
		cnt->c[why]++;

	if (target != TARGET_FALLBACK) {
		target = cpu_idx(target);
		dest = cfg->cpus[target];
		h = steer_hash(fh, target, n);
	} else {
		/* The next stage stays on this CPU. Hash 0 makes get_rps_cpu() do no
		 * RPS (verified on 6.18: the VXLAN stage then runs inside the
		 * gro_cells poll); "local" aims RPS here, one backlog trip more. */
		__u16 pos = cur < MAX_CPUS ? cfg->pos[cpu_idx(cur)] : 0;

		dest = cur;
		h = 0;
		if (cfg->fallback == FALLBACK_LOCAL && pos > 0 && pos <= n)
			h = steer_hash(fh, pos - 1, n);
	}
	bpf_set_hash(skb, h);
	count_steered(cnt, hid, dest);
	record(skb, fh, kind, dest, h, hit);
	return PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
