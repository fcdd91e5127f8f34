// Package steer is the Go twin of the BPF program's decisions (bpf/falcon.c):
// the flow hash, FALCON's two-choice CPU selection (Algorithm 1) and the
// hash that makes the kernel's RPS pick a given CPU. It is the one Go copy
// of the policy; the simulator and the tests use it, and a test checks that
// it agrees with the BPF program packet by packet. The XDP program that
// splits the NIC stage (bpf/split.c) makes the same choice over the split
// CPU set, salted with the NIC's own ifindex.
package steer

import (
	"math/bits"
	"net/netip"
)

// Kind names how a CPU was chosen.
type Kind int

const (
	None     Kind = iota // not steered (the packet passed untouched)
	First                // the first hash choice, under the load threshold
	Second               // the second hash choice (never load-checked)
	Fallback             // average load >= threshold or stale data: stay on the current CPU
)

func (k Kind) String() string {
	switch k {
	case First:
		return "first"
	case Second:
		return "second"
	case Fallback:
		return "fallback"
	}
	return "none"
}

// Hash32 is murmur3's 32-bit finaliser (fmix32).
func Hash32(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

func mix(h, k uint32) uint32 {
	k *= 0xcc9e2d51
	k = bits.RotateLeft32(k, 15)
	k *= 0x1b873593
	h ^= k
	h = bits.RotateLeft32(h, 13)
	return h*5 + 0xe6546b64
}

const flowSeed = 0x46414c43 // "FALC"

// FlowHash is murmur3_32 over the 5-tuple as big-endian 32-bit words:
// source, destination, sport<<16|dport, proto|version<<8. Ports are 0 for
// protocols other than TCP and UDP. Both addresses must be of one family;
// IPv4-mapped IPv6 addresses count as IPv6, as on the wire.
func FlowHash(proto uint8, src, dst netip.Addr, sport, dport uint16) uint32 {
	h := uint32(flowSeed)
	var words uint32
	v6 := src.Is6()
	if v6 {
		s, d := src.As16(), dst.As16()
		for i := 0; i < 16; i += 4 {
			h = mix(h, be32(s[i:]))
		}
		for i := 0; i < 16; i += 4 {
			h = mix(h, be32(d[i:]))
		}
		words = 10
	} else {
		s, d := src.As4(), dst.As4()
		h = mix(h, be32(s[:]))
		h = mix(h, be32(d[:]))
		words = 4
	}
	ver := uint32(4)
	if v6 {
		ver = 6
	}
	h = mix(h, uint32(sport)<<16|uint32(dport))
	h = mix(h, uint32(proto)|ver<<8)
	h ^= words * 4
	return Hash32(h)
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// Choose is Algorithm 1: cpus is the Falcon CPU set S (ascending, non-empty),
// load the per-CPU load in percent indexed by CPU id (missing = 0), avg the
// average load of S. It returns the CPU for the next stage, or -1 with
// Fallback when the next stage should stay on the current CPU.
func Choose(flowhash, nextIfindex uint32, cpus []int, load []uint32, threshold, avg uint32, stale bool) (int, Kind) {
	return ChooseVariant(flowhash, nextIfindex, cpus, load, threshold, avg, stale, Variant{})
}

// Variant is what FALCON's figures vary in Algorithm 1 (the datapath's
// policy static and its always-on setting).
type Variant struct {
	Static   bool // Fig. 16's static: the first hash choice, busy or not
	AlwaysOn bool // Fig. 15's always-on: never inline for the set's average load
}

// ChooseVariant is Choose as variant v runs it (bpf/choose.h,
// choose_paper).
func ChooseVariant(flowhash, nextIfindex uint32, cpus []int, load []uint32, threshold, avg uint32, stale bool, v Variant) (int, Kind) {
	if stale || (!v.AlwaysOn && avg >= threshold) || len(cpus) == 0 {
		return -1, Fallback
	}
	if v.Static {
		return cpus[Hash32(flowhash+nextIfindex)%uint32(len(cpus))], First
	}
	idx, kind := ChooseIndex(flowhash, nextIfindex, len(cpus), func(i int) uint32 {
		if c := cpus[i]; c >= 0 && c < len(load) {
			return load[c]
		}
		return 0
	}, threshold)
	return cpus[idx], kind
}

// Stale is the program's test of the load data: with staleNs set, data
// never written (updatedNs 0) or older than staleNs at nowNs is stale. All
// times are CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns on the BPF side);
// data stamped after nowNs is fresh.
func Stale(nowNs, updatedNs, staleNs uint64) bool {
	if staleNs == 0 {
		return false
	}
	return updatedNs == 0 || (int64(nowNs-updatedNs) > 0 && nowNs-updatedNs > staleNs)
}

// ChooseIndex is Choose without the fallback test, in terms of indexes into
// S: loadAt(i) is the load of S[i].
func ChooseIndex(flowhash, nextIfindex uint32, n int, loadAt func(int) uint32, threshold uint32) (int, Kind) {
	h1 := Hash32(flowhash + nextIfindex)
	i := int(h1 % uint32(n))
	if loadAt(i) < threshold {
		return i, First
	}
	return int(Hash32(h1) % uint32(n)), Second
}

// SteerHash returns a non-zero hash that get_rps_cpu() maps to the idx-th of
// n CPUs: h in [ceil(idx*2^32/n), ceil((idx+1)*2^32/n) - 1], its low part
// taken from the flow hash so that flows stay distinguishable.
func SteerHash(flowhash uint32, idx, n int) uint32 {
	lo := ((uint64(idx) << 32) + uint64(n) - 1) / uint64(n)
	hi := ((uint64(idx+1) << 32) + uint64(n) - 1) / uint64(n)
	h := uint32(lo + uint64(flowhash)%(hi-lo))
	if h == 0 {
		return 1
	}
	return h
}

// RPSCPU is get_rps_cpu()'s choice for a non-zero hash: cpus[(hash*len)>>32]
// (reciprocal_scale), cpus being the rps_cpus mask's CPUs in ascending order.
// It returns -1 for hash 0, which means no RPS.
func RPSCPU(hash uint32, cpus []int) int {
	if hash == 0 || len(cpus) == 0 {
		return -1
	}
	return cpus[(uint64(hash)*uint64(len(cpus)))>>32]
}

// AvgLoad is the average load of a CPU set, rounded to a percent: the
// "avg_load(S)" of Algorithm 1's off switch for a set whose average the
// load sampler does not publish itself (the split set). load is indexed by
// CPU id; missing CPUs count 0.
func AvgLoad(cpus []int, load []uint32) uint32 {
	if len(cpus) == 0 {
		return 0
	}
	var sum uint64
	for _, c := range cpus {
		if c >= 0 && c < len(load) {
			sum += uint64(load[c])
		}
	}
	n := uint64(len(cpus))
	return uint32((sum + n/2) / n)
}

// DefaultVXLANPorts are IANA's and Linux's (Flannel's) VXLAN ports: the UDP
// destination ports the parser, its twin here and the stage tracer take for
// VXLAN unless told otherwise.
var DefaultVXLANPorts = []uint16{4789, 8472}
