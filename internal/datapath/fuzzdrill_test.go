package datapath

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/lab/labtest"
)

// TestFuzzDrill runs random and mutated packets through every program that
// takes packets — falcon_steer at a NIC and at an overlay device,
// falcon_split (XDP) and the guard's falcon_arrive (tc) — with
// BPF_PROG_TEST_RUN, and holds each run to the reference parser
// (refparse_test.go): the packet passes (a split may redirect what it
// decided on) with its bytes unchanged, and what the program recorded — its
// decision and flow hash in falcon_debug, the counter slot it bumped, the
// arrival it noted as pending — is what the reference says: the same flow,
// or the same reason to leave it alone. The guard's tracepoint programs
// (napi_poll, kfree_skb) cannot be test-run; they are detached here so that
// nothing but the drill touches the pending arrival it reads.
//
// FALCON_FUZZ_PACKETS sets the number of packets (default 20000, about
// three seconds); FALCON_FUZZ_SEED the seed (default: the clock), printed
// on failure and in -v output.
func TestFuzzDrill(t *testing.T) {
	labtest.NeedRoot(t)
	n := envInt(t, "FALCON_FUZZ_PACKETS", 20000)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FALCON_FUZZ_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 0, 64); err != nil {
			t.Fatalf("FALCON_FUZZ_SEED: %v", err)
		}
	}
	t.Logf("seed %d, %d packets (FALCON_FUZZ_SEED=%d FALCON_FUZZ_PACKETS=%d reproduces)", seed, n, seed, n)

	cfg := testConfig()
	cfg.SplitCPUs = []int{0, 1}
	h := newHarness(t, cfg)
	h.addSplit(7)
	h.d.mu.Lock()
	err := h.d.guard.detachTracing()
	h.d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	load := []uint32{50, 95, 10, 0, 0, 30}
	h.setLoad(load, 40, true)
	pending := pendingMap(t, h.d.guard.arrive)

	// Per-CPU maps are read at CPU 0's slot: the drill runs there alone.
	pinnedThread(t)(0)

	d := &drill{t: t, h: h, load: load, avg: 40, pending: pending, counts: map[string]map[string]int{}, classes: map[string]int{},
		last: map[HookRole][cntMax]uint64{}, out: make([]byte, 4096)}
	for _, role := range []HookRole{HookOnNIC, HookOnOverlay, HookSplit} {
		d.last[role] = d.counters(role)
	}
	d.seq = d.debug().Seq

	splitProtos := []string{SplitAll, SplitTCP, SplitUDP}
	r := rand.New(rand.NewPCG(seed, seed^0x46414c43))
	start := time.Now()
	for i := 0; i < n; i++ {
		if i%1000 == 0 { // --split-proto: the split program's own reason to pass
			cfg.SplitProto = splitProtos[(i/1000)%len(splitProtos)]
			h.writeConfig(cfg)
			p, err := splitProto(cfg.SplitProto)
			if err != nil {
				t.Fatal(err)
			}
			d.splitProto = uint8(p)
		}
		pkt, class, inner, encap, valid := fuzzPacket(r)
		d.classes[class]++
		d.where = fmt.Sprintf("seed %d, packet %d (%s, %d bytes: %x)", seed, i, class, len(pkt), pkt)
		if valid {
			d.checkReference(pkt, inner, encap)
		}
		d.steer(HookOnNIC, pkt)
		d.steer(HookOnOverlay, pkt)
		d.split(pkt)
		d.arrive(pkt)
		if t.Failed() {
			t.FailNow()
		}
	}
	elapsed := time.Since(start)
	d.report(n, elapsed)
}

// drill is the state of one TestFuzzDrill.
type drill struct {
	t          *testing.T
	h          *harness
	load       []uint32
	avg        uint32
	splitProto uint8
	pending    *ebpf.Map
	last       map[HookRole][cntMax]uint64 // CPU 0's counter slots per hook
	seq        uint64                      // falcon_debug's, CPU 0
	out        []byte
	where      string
	counts     map[string]map[string]int // program -> outcome -> packets
	classes    map[string]int
}

const (
	progNIC     = "falcon_steer at a NIC (tc)"
	progOverlay = "falcon_steer at an overlay device (tc)"
	progSplit   = "falcon_split (XDP)"
	progArrive  = "falcon_arrive (tc, guard)"
)

func (d *drill) count(prog, outcome string) {
	if d.counts[prog] == nil {
		d.counts[prog] = map[string]int{}
	}
	d.counts[prog][outcome]++
}

// run test-runs p on pkt and checks the bytes come back unchanged; false
// when the kernel refused the frame (BPF_PROG_TEST_RUN will not build an
// skb whose IP ethertype has no room for the IP header, as in tryRun).
func (d *drill) run(prog string, p *ebpf.Program, pkt []byte) (uint32, bool) {
	d.t.Helper()
	opts := ebpf.RunOptions{Data: pkt, DataOut: d.out[:cap(d.out)]}
	ret, err := p.Run(&opts)
	if errors.Is(err, unix.EINVAL) && shortL3(pkt) && prog != progSplit {
		d.count(prog, "refused by BPF_PROG_TEST_RUN")
		return 0, false
	}
	if err != nil {
		d.t.Fatalf("%s: test run: %v\n%s", prog, err, d.where)
	}
	if !bytes.Equal(opts.DataOut, pkt) {
		d.t.Errorf("%s changed the packet: out %x\n%s", prog, opts.DataOut, d.where)
	}
	return ret, true
}

func (d *drill) debug() falconDebug {
	d.t.Helper()
	var v []falconDebug
	if err := d.h.d.maps.FalconDebug.Lookup(uint32(0), &v); err != nil {
		d.t.Fatal(err)
	}
	return v[0]
}

func (d *drill) counters(role HookRole) [cntMax]uint64 {
	d.t.Helper()
	var v []falconCounters
	if err := d.h.d.maps.FalconCounters.Lookup(d.h.ids[role], &v); err != nil {
		d.t.Fatal(err)
	}
	return v[0].C
}

// recorded reads what a hook's run left: its debug record, and the one
// counter slot it bumped (every packet lands in exactly one).
func (d *drill) recorded(prog string, role HookRole) (falconDebug, int) {
	d.t.Helper()
	dbg := d.debug()
	if dbg.Seq != d.seq+1 || dbg.Cur != 0 {
		d.t.Fatalf("%s: debug record seq %d on CPU %d, want %d on CPU 0\n%s", prog, dbg.Seq, dbg.Cur, d.seq+1, d.where)
	}
	d.seq = dbg.Seq
	c := d.counters(role)
	slot, bumped := -1, 0
	for i := range c {
		if diff := c[i] - d.last[role][i]; diff != 0 {
			slot, bumped = i, bumped+int(diff)
		}
	}
	d.last[role] = c
	if bumped != 1 {
		d.t.Fatalf("%s: %d counter slots bumped, want 1\n%s", prog, bumped, d.where)
	}
	return dbg, slot
}

// decided checks a run the reference says the program decides on.
func (d *drill) decided(prog string, dbg falconDebug, slot int, f flowSpec) {
	d.t.Helper()
	if dbg.Kind == 0 || slot >= cntPassNonIP {
		d.t.Errorf("%s passed it (%s); the reference parses %v\n%s", prog, passReasons[slot], f, d.where)
		return
	}
	if dbg.Flowhash != f.hash() {
		d.t.Errorf("%s: flow hash %#x; the reference parses %v, hash %#x\n%s", prog, dbg.Flowhash, f, f.hash(), d.where)
	}
}

// passed checks a run the reference says the program leaves alone.
func (d *drill) passed(prog string, dbg falconDebug, slot int, why string) {
	d.t.Helper()
	if dbg.Kind != 0 || slot < cntPassNonIP {
		d.t.Errorf("%s decided on it (flow hash %#x); the reference passes it: %s\n%s", prog, dbg.Flowhash, why, d.where)
		return
	}
	if passReasons[slot] != why {
		d.t.Errorf("%s passed it as %s; the reference: %s\n%s", prog, passReasons[slot], why, d.where)
	}
}

func (d *drill) steer(role HookRole, pkt []byte) {
	d.t.Helper()
	prog := progOverlay
	if role == HookOnNIC {
		prog = progNIC
	}
	ret, ok := d.run(prog, d.h.progs[role], pkt)
	if !ok {
		return
	}
	if ret != tcActUnspec {
		d.t.Errorf("%s: verdict %#x, want TC_ACT_UNSPEC\n%s", prog, ret, d.where)
	}
	dbg, slot := d.recorded(prog, role)
	f, why := refParse(pkt, role == HookOnNIC, fuzzPorts)
	if why != "" {
		d.count(prog, "passed: "+why)
		d.passed(prog, dbg, slot, why)
		return
	}
	d.count(prog, "decided")
	d.decided(prog, dbg, slot, f)
	if !d.t.Failed() { // and the choice is the Go twin's
		d.h.checkSteer(prog+" "+d.where, result{ret: ret, dbg: dbg, cpu: 0}, role, f.hash(), d.load, d.avg, false)
	}
}

func (d *drill) split(pkt []byte) {
	d.t.Helper()
	ret, _ := d.run(progSplit, d.h.progs[HookSplit], pkt)
	dbg, slot := d.recorded(progSplit, HookSplit)
	f, why := refSplit(pkt, fuzzPorts, d.splitProto)
	if why != "" {
		d.count(progSplit, "passed: "+why)
		if ret != xdpPass {
			d.t.Errorf("%s: verdict %d for a packet it leaves alone, want XDP_PASS\n%s", progSplit, ret, d.where)
		}
		d.passed(progSplit, dbg, slot, why)
		return
	}
	// A decided frame goes to the chosen CPU's cpumap queue, or is built
	// here (XDP_PASS); nothing is dropped.
	if ret == xdpRedirect {
		d.count(progSplit, "decided, redirected")
	} else {
		d.count(progSplit, "decided, passed")
	}
	d.decided(progSplit, dbg, slot, f)
	if !d.t.Failed() {
		d.h.checkSplit(progSplit+" "+d.where, result{ret: ret, dbg: dbg, cpu: 0}, f.hash(), d.load, d.avg, false)
	}
}

// arrive: falcon_arrive notes a parsed arrival as pending on its CPU (it
// is counted at the next one), and clears the slot for anything else.
func (d *drill) arrive(pkt []byte) {
	d.t.Helper()
	ret, ok := d.run(progArrive, d.h.d.guard.arrive, pkt)
	if !ok {
		return
	}
	if ret != tcActUnspec {
		d.t.Errorf("%s: verdict %#x, want TC_ACT_UNSPEC\n%s", progArrive, ret, d.where)
	}
	var v []guardPending
	if err := d.pending.Lookup(uint32(0), &v); err != nil {
		d.t.Fatal(err)
	}
	f, why := refParse(pkt, false, fuzzPorts)
	if why != "" {
		d.count(progArrive, "passed: "+why)
		if v[0].N != 0 {
			d.t.Errorf("%s noted an arrival of flow %#x; the reference: %s\n%s", progArrive, v[0].E[0].Fh, why, d.where)
		}
		return
	}
	d.count(progArrive, "counted")
	if p := v[0].E[0]; v[0].N != 1 || p.Segs != 1 || p.Fh != f.hash() {
		d.t.Errorf("%s noted %d arrivals, the first %d segments of flow %#x; the reference parses %v, hash %#x\n%s",
			progArrive, v[0].N, p.Segs, p.Fh, f, f.hash(), d.where)
	}
}

// checkReference holds the reference parser to the generator: a valid
// frame with nothing on its path that the parser declines is parsed to the
// flow it was built with.
func (d *drill) checkReference(pkt []byte, inner hdr, encap bool) {
	d.t.Helper()
	f, why := refParse(pkt, encap, fuzzPorts)
	want := inner.flow()
	if want.proto != protoTCP && want.proto != protoUDP {
		want.sport, want.dport = 0, 0
	}
	if !clean(inner) { // an IPv6 protocol number that names an extension header: the body is one
		return
	}
	if why == "" && f != want {
		d.t.Errorf("reference parsed %v from a frame built with %v\n%s", f, want, d.where)
	}
	if why != "" && (!encap || outerClean(pkt)) {
		d.t.Errorf("reference passed (%s) a frame built with %v\n%s", why, want, d.where)
	}
}

// clean: nothing in the layer makes the parser decline it.
func clean(h hdr) bool {
	if len(h.tags) > 1 || h.frag&0x3fff != 0 || len(h.exts) > 4 || slices.Contains(h.exts, 44) {
		return false
	}
	return !h.v6 || !slices.Contains([]uint8{0, 43, 44, 51, 60}, h.proto)
}

// outerClean: the generator's outer headers of an encapsulated valid
// frame are plain when the frame starts with an untagged IPv4 or IPv6
// header without options, unfragmented, to a configured port with the I
// flag; the other encapsulated frames are left to the program comparison.
func outerClean(pkt []byte) bool {
	switch {
	case pkt[12] == 0x08 && pkt[13] == 0x00 && pkt[14] == 0x45 && pkt[20]&0x3f == 0 && pkt[21] == 0:
		return slices.Contains(fuzzPorts, uint16(pkt[36])<<8|uint16(pkt[37])) && pkt[42]&0x08 != 0
	case pkt[12] == 0x86 && pkt[13] == 0xdd && pkt[20] == protoUDP:
		return slices.Contains(fuzzPorts, uint16(pkt[56])<<8|uint16(pkt[57])) && pkt[62]&0x08 != 0
	}
	return false
}

func (d *drill) report(n int, elapsed time.Duration) {
	t := d.t
	var b strings.Builder
	fmt.Fprintf(&b, "%d packets, each offered to the four programs, in %v (%.0f packets/s)\n", n,
		elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())
	fmt.Fprintf(&b, "packets by class:\n")
	for _, c := range sortedKeys(d.classes) {
		fmt.Fprintf(&b, "  %-24s %d\n", c, d.classes[c])
	}
	for _, p := range []string{progNIC, progOverlay, progSplit, progArrive} {
		fmt.Fprintf(&b, "%s:\n", p)
		for _, o := range sortedKeys(d.counts[p]) {
			fmt.Fprintf(&b, "  %-32s %d\n", o, d.counts[p][o])
		}
	}
	t.Log(b.String())
	if n < 20000 {
		return
	}
	// The drill reaches every outcome, or it is not testing the parser.
	for _, p := range []string{progNIC, progOverlay, progSplit, progArrive} {
		want := []string{"passed: truncated", "passed: malformed", "passed: fragment", "passed: non_ip"}
		switch p {
		case progNIC:
			want = append(want, "decided", "passed: not_vxlan")
		case progOverlay:
			want = append(want, "decided")
		case progSplit:
			want = append(want, "decided, redirected", "passed: not_vxlan", "passed: not_split_proto")
		case progArrive:
			want = append(want, "counted")
		}
		for _, o := range want {
			if d.counts[p][o] == 0 {
				t.Errorf("%s: no packet %s", p, o)
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	slices.Sort(k)
	return k
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

// pendingMap finds the guard's falcon_pending among the maps its arrival
// program uses (the loader keeps no handle on it).
func pendingMap(t *testing.T, p *ebpf.Program) *ebpf.Map {
	t.Helper()
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := info.MapIDs()
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			t.Fatal(err)
		}
		if mi, err := m.Info(); err == nil && mi.Name == "falcon_pending" {
			t.Cleanup(func() { m.Close() })
			return m
		}
		m.Close()
	}
	t.Fatal("falcon_arrive uses no map named falcon_pending")
	return nil
}
