package datapath

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/steer"
)

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.CPUs = []int{0, 1, 2, 3, 5, 8, 13}
	cfg.Policy = PolicyPaper
	cfg.PerPacket = true
	cfg.StaleAfter = 0
	return cfg
}

var (
	tcp4 = flowSpec{protoTCP, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 40000, 5201}
	udp4 = flowSpec{protoUDP, netip.MustParseAddr("10.0.0.3"), netip.MustParseAddr("10.0.0.4"), 1234, 11111}
	tcp6 = flowSpec{protoTCP, netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2"), 40000, 5201}
	udp6 = flowSpec{protoUDP, netip.MustParseAddr("fd00::3"), netip.MustParseAddr("fd00::4"), 1234, 11111}
	icmp = flowSpec{1, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 0, 0}
)

func arpFrame() []byte { return append(ethernet(0x0806, false), make([]byte, 28)...) }

func TestParseAndSteer(t *testing.T) {
	h := newHarness(t, testConfig())
	load := []uint32{0, 90, 0, 0, 0, 0, 0, 0, 95} // CPUs 1 and 8 over the threshold
	h.setLoad(load, 20, true)

	steered := steerCases()
	for _, c := range steered {
		h.checkSteer(c.name, h.run(c.role, c.pkt), c.role, c.flow.hash(), load, 20, false)
	}

	passed := passCases()
	want := map[string]uint64{}
	for _, c := range passed {
		r := h.run(c.role, c.pkt)
		if r.ret != tcActUnspec || r.steered() || r.dbg.SkbHash != 0 {
			t.Errorf("%s: verdict %#x, steered %v, skb hash %#x; want untouched pass", c.name, r.ret, r.steered(), r.dbg.SkbHash)
		}
		want[c.reason]++
	}

	cnt, err := h.d.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for reason, n := range want {
		if cnt.Passed[reason] != n {
			t.Errorf("passed[%s] = %d, want %d", reason, cnt.Passed[reason], n)
		}
	}
	if got := cnt.First + cnt.Second + cnt.Fallback; got != uint64(len(steered)) {
		t.Errorf("first+second+fallback = %d, want %d", got, len(steered))
	}
	var ran uint64
	for _, perCPU := range cnt.RanOn {
		for _, n := range perCPU {
			ran += n
		}
	}
	if ran != uint64(len(steered)+len(passed)) {
		t.Errorf("packets ran = %d, want %d", ran, len(steered)+len(passed))
	}
}

// steerCase is a frame a hook of role decides on: the inner flow's.
type steerCase struct {
	name string
	role HookRole
	flow flowSpec
	pkt  []byte
}

// steerCases are TestParseAndSteer's frames of every shape the parser
// reads to the inner flow.
func steerCases() []steerCase {
	return []steerCase{
		{"overlay tcp4", HookOnOverlay, tcp4, frame(tcp4, pktOpts{payload: 100})},
		{"overlay udp4", HookOnOverlay, udp4, frame(udp4, pktOpts{})},
		{"overlay tcp6", HookOnOverlay, tcp6, frame(tcp6, pktOpts{payload: 10})},
		{"overlay udp6", HookOnOverlay, udp6, frame(udp6, pktOpts{})},
		{"overlay icmp", HookOnOverlay, icmp, frame(icmp, pktOpts{payload: 8})},
		{"overlay vlan", HookOnOverlay, tcp4, frame(tcp4, pktOpts{vlan: true})},
		{"overlay ip options", HookOnOverlay, udp4, frame(udp4, pktOpts{ipOptions: 3})},
		{"overlay v6 hop-by-hop", HookOnOverlay, tcp6, frame(tcp6, pktOpts{v6HopOpts: true})},
		{"nic v4 in v4", HookOnNIC, tcp4, vxlanFrame(underlay4a, underlay4b, 4789, frame(tcp4, pktOpts{}), pktOpts{})},
		{"nic v6 in v4", HookOnNIC, udp6, vxlanFrame(underlay4a, underlay4b, 8472, frame(udp6, pktOpts{}), pktOpts{})},
		{"nic v4 in v6", HookOnNIC, udp4, vxlanFrame(underlay6a, underlay6b, 4789, frame(udp4, pktOpts{}), pktOpts{})},
		{"nic v6 in v6", HookOnNIC, tcp6, vxlanFrame(underlay6a, underlay6b, 4789, frame(tcp6, pktOpts{payload: 1400}), pktOpts{})},
		{"nic outer vlan", HookOnNIC, tcp4, vxlanFrame(underlay4a, underlay4b, 4789, frame(tcp4, pktOpts{}), pktOpts{vlan: true})},
		{"nic inner vlan", HookOnNIC, tcp4, vxlanFrame(underlay4a, underlay4b, 4789, frame(tcp4, pktOpts{vlan: true}), pktOpts{})},
		{"nic outer v6 hop-by-hop", HookOnNIC, tcp4, vxlanFrame(underlay6a, underlay6b, 4789, frame(tcp4, pktOpts{}), pktOpts{v6HopOpts: true})},
		// headers beyond MAX_DIRECT_OFF: read with bpf_skb_load_bytes
		{"nic deep headers", HookOnNIC, tcp6, vxlanFrame(underlay6a, underlay6b, 4789, frame(tcp6, pktOpts{v6HopOpts: true, v6HopLen: 20}), pktOpts{v6HopOpts: true, v6HopLen: 30})},
	}
}

// passCase is a frame a hook of role must pass untouched, counted under
// reason.
type passCase struct {
	name, reason string
	role         HookRole
	pkt          []byte
}

// passCases are TestParseAndSteer's frames the parser must not decide on.
func passCases() []passCase {
	return []passCase{
		{"overlay arp", "non_ip", HookOnOverlay, arpFrame()},
		{"nic arp", "non_ip", HookOnNIC, arpFrame()},
		{"inner arp", "non_ip", HookOnNIC, vxlanFrame(underlay4a, underlay4b, 4789, arpFrame(), pktOpts{})},
		{"v4 more fragments", "fragment", HookOnOverlay, frame(udp4, pktOpts{moreFrags: true})},
		{"v4 later fragment", "fragment", HookOnOverlay, frame(udp4, pktOpts{fragOff: 185})},
		{"v6 fragment header", "fragment", HookOnOverlay, frame(udp6, pktOpts{v6Frag: true})},
		{"v6 hop-by-hop then fragment", "fragment", HookOnOverlay, frame(udp6, pktOpts{v6HopOpts: true, v6Frag: true})},
		{"outer fragment", "fragment", HookOnNIC, vxlanFrame(underlay4a, underlay4b, 4789, frame(tcp4, pktOpts{}), pktOpts{moreFrags: true})},
		{"inner fragment", "fragment", HookOnNIC, vxlanFrame(underlay4a, underlay4b, 4789, frame(udp4, pktOpts{fragOff: 3}), pktOpts{})},
		{"unconfigured port", "not_vxlan", HookOnNIC, vxlanFrame(underlay4a, underlay4b, 4790, frame(tcp4, pktOpts{}), pktOpts{})},
		{"plain tcp at nic", "not_vxlan", HookOnNIC, frame(tcp4, pktOpts{})},
		{"plain udp at nic", "not_vxlan", HookOnNIC, frame(udp6, pktOpts{})},
		{"vxlan without I flag", "malformed", HookOnNIC, func() []byte {
			p := vxlanFrame(underlay4a, underlay4b, 4789, frame(tcp4, pktOpts{}), pktOpts{})
			p[14+20+8] = 0
			return p
		}()},
		{"ip version 5", "malformed", HookOnOverlay, func() []byte { p := frame(tcp4, pktOpts{}); p[14] = 0x55; return p }()},
		{"ihl 4", "malformed", HookOnOverlay, func() []byte { p := frame(tcp4, pktOpts{}); p[14] = 0x44; return p }()},
		{"v6 header says 4", "malformed", HookOnOverlay, func() []byte { p := frame(tcp6, pktOpts{}); p[14] = 0x40; return p }()},
		{"ethertype says v6, v4 inside", "malformed", HookOnOverlay, func() []byte { p := frame(tcp4, pktOpts{payload: 40}); p[12], p[13] = 0x86, 0xdd; return p }()},
		{"short tcp", "truncated", HookOnOverlay, frame(tcp4, pktOpts{})[:14+20+19]},
	}
}

func TestTruncatedAtEveryLength(t *testing.T) {
	h := newHarness(t, testConfig())
	h.setLoad(nil, 0, true)
	cases := []struct {
		name string
		role HookRole
		flow flowSpec
		pkt  []byte
		hdrs int // bytes up to the end of the L4 header
	}{
		{"overlay tcp4", HookOnOverlay, tcp4, frame(tcp4, pktOpts{payload: 10}), 14 + 20 + 20},
		{"overlay udp6 hop-by-hop", HookOnOverlay, udp6, frame(udp6, pktOpts{payload: 10, v6HopOpts: true}), 14 + 40 + 8 + 8},
		{"overlay vlan udp4", HookOnOverlay, udp4, frame(udp4, pktOpts{payload: 10, vlan: true}), 18 + 20 + 8},
		{"nic tcp6 in v4", HookOnNIC, tcp6, vxlanFrame(underlay4a, underlay4b, 4789, frame(tcp6, pktOpts{payload: 10}), pktOpts{}), 14 + 20 + 8 + 8 + 14 + 40 + 20},
		{"nic udp4 in v6 vlan", HookOnNIC, udp4, vxlanFrame(underlay6a, underlay6b, 4789, frame(udp4, pktOpts{payload: 10, vlan: true}), pktOpts{vlan: true}), 18 + 40 + 8 + 8 + 18 + 20 + 8},
		{"nic deep headers", HookOnNIC, tcp6, vxlanFrame(underlay6a, underlay6b, 4789, frame(tcp6, pktOpts{payload: 10, v6HopOpts: true, v6HopLen: 20}), pktOpts{v6HopOpts: true, v6HopLen: 30}),
			14 + 40 + 8 + 240 + 8 + 8 + 14 + 40 + 8 + 160 + 20},
	}
	for _, c := range cases {
		for n := 14; n <= len(c.pkt); n++ {
			r, ok := h.tryRun(c.role, c.pkt[:n])
			if !ok {
				continue
			}
			if r.ret != tcActUnspec {
				t.Fatalf("%s at %d bytes: verdict %#x", c.name, n, r.ret)
			}
			if n < c.hdrs && r.steered() {
				t.Errorf("%s truncated at %d of %d header bytes: steered", c.name, n, c.hdrs)
			}
			if n >= c.hdrs {
				h.checkSteer(c.name, r, c.role, c.flow.hash(), nil, 0, false)
			}
		}
	}
	cnt, err := h.d.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if cnt.Passed["truncated"] == 0 {
		t.Error("no packet counted as truncated")
	}
}

func TestRandomBytes(t *testing.T) {
	h := newHarness(t, testConfig())
	load := []uint32{50, 50, 90, 0}
	h.setLoad(load, 40, true)
	cpus := h.d.Config().SortedCPUs()
	r := rand.New(rand.NewPCG(3, 4))
	valid := [][]byte{
		frame(tcp4, pktOpts{payload: 20}),
		frame(udp6, pktOpts{v6HopOpts: true}),
		vxlanFrame(underlay4a, underlay4b, 4789, frame(tcp6, pktOpts{}), pktOpts{}),
		vxlanFrame(underlay6a, underlay6b, 8472, frame(udp4, pktOpts{vlan: true}), pktOpts{}),
	}
	for i := 0; i < 20000; i++ {
		var pkt []byte
		if i%2 == 0 {
			pkt = make([]byte, 14+r.IntN(200))
			for j := range pkt {
				pkt[j] = byte(r.Uint32())
			}
			if i%4 == 0 { // make the ethertype plausible more often
				pkt[12], pkt[13] = 0x08, 0x00
			}
		} else {
			pkt = append([]byte(nil), valid[r.IntN(len(valid))]...)
			for k := 1 + r.IntN(4); k > 0; k-- {
				pkt[r.IntN(len(pkt))] = byte(r.Uint32())
			}
			pkt = pkt[:14+r.IntN(len(pkt)-13)]
		}
		role := HookOnOverlay
		if i%3 == 0 {
			role = HookOnNIC
		}
		res, ok := h.tryRun(role, pkt)
		if !ok {
			continue
		}
		if res.ret != tcActUnspec {
			t.Fatalf("packet %x: verdict %#x", pkt, res.ret)
		}
		if res.steered() {
			// whatever the program parsed, its choice must be the twin's
			h.checkSteer("random", res, role, res.dbg.Flowhash, load, 40, false)
			if indexOf(cpus, int(res.dbg.Target)) < 0 {
				t.Fatalf("steered to CPU %d outside %v", res.dbg.Target, cpus)
			}
		}
		if t.Failed() {
			t.Fatalf("packet %x", pkt)
		}
	}
}

// guest: runs the program on the old kernel (BPF_PROG_TEST_RUN)
func TestDisabledHookPasses(t *testing.T) {
	h := newHarness(t, testConfig())
	h.setLoad(nil, 0, true)
	if err := h.d.writeHook(h.ids[HookOnOverlay], h.hooks[HookOnOverlay], false); err != nil {
		t.Fatal(err)
	}
	if r := h.run(HookOnOverlay, frame(tcp4, pktOpts{})); r.steered() {
		t.Error("inactive hook steered a packet")
	}
}

// guest: runs the program on the old kernel (BPF_PROG_TEST_RUN)
func TestFallbackSpellings(t *testing.T) {
	cfg := testConfig()
	h := newHarness(t, cfg)
	pkt := frame(tcp4, pktOpts{})
	fh := tcp4.hash()

	h.setLoad(nil, 100, true) // average over the threshold
	r := h.run(HookOnOverlay, pkt)
	if steer.Kind(r.dbg.Kind).String() != "fallback" || r.dbg.SetHash != 0 || int(r.dbg.Target) != r.cpu {
		t.Errorf("inline: kind %s hash %#x target %d on CPU %d; want fallback, hash 0, target = current CPU",
			steer.Kind(r.dbg.Kind).String(), r.dbg.SetHash, r.dbg.Target, r.cpu)
	}

	h.setLoad(nil, 0, false) // never updated: stale, with stale-after set
	cfg.StaleAfter = time.Second
	cfg.Fallback = FallbackLocal
	if err := h.d.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	r = h.run(HookOnOverlay, pkt)
	cpus := cfg.SortedCPUs()
	want := uint32(0)
	if i := indexOf(cpus, r.cpu); i >= 0 {
		want = steer.SteerHash(fh, i, len(cpus))
	}
	if steer.Kind(r.dbg.Kind).String() != "fallback" || r.dbg.SetHash != want || int(r.dbg.Target) != r.cpu {
		t.Errorf("local: kind %s hash %#x target %d on CPU %d; want fallback, hash %#x", steer.Kind(r.dbg.Kind).String(), r.dbg.SetHash, r.dbg.Target, r.cpu, want)
	}

	// local, but this CPU is outside the set: inline
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &old)
	one.Set(0)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	cfg.CPUs = []int{1, 2}
	if err := h.d.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	r = h.run(HookOnOverlay, pkt)
	if r.cpu != 0 || steer.Kind(r.dbg.Kind) != steer.Fallback || r.dbg.SetHash != 0 || r.dbg.Target != 0 {
		t.Errorf("local outside S: ran on %d, kind %v hash %#x target %d; want CPU 0, fallback, hash 0, target 0",
			r.cpu, steer.Kind(r.dbg.Kind), r.dbg.SetHash, r.dbg.Target)
	}

	cnt, _ := h.d.Counters()
	if cnt.Fallback != 3 || cnt.FallbackStale != 2 {
		t.Errorf("fallback %d (stale %d), want 3 (2)", cnt.Fallback, cnt.FallbackStale)
	}
}
