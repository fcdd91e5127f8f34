/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* The hash that makes RPS pick a CPU: falcon's steering (choose.h) and the
 * fast path's sender order (fastpath_order.h) both choose a backlog with
 * it. The Go twin is internal/steer. */
#ifndef FALCON_RPSHASH_H
#define FALCON_RPSHASH_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

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

#endif
