package datapath

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

const tcActShot = 2

// FuzzFastPath runs the fast path's six tc programs, in packet order, on
// fuzzed bytes with BPF_PROG_TEST_RUN (root only; TestFuzzDrill covers the
// steering, split and guard programs, not these): none fails to run, each
// verdict is one the programs mean (pass, drop, redirect), and a packet
// passed to the slow path is passed as it came, byte for byte. What one
// input teaches the caches stays for the next, so later inputs reach the
// cached paths too.
func FuzzFastPath(f *testing.F) {
	fp := fastHarness(f)
	if err := fp.SetSenderOrder([]int{0, 1}); err != nil {
		f.Fatal(err)
	}
	fl := fastFlow()
	inner := frame(fl, pktOpts{payload: 16})
	f.Add(vxlanFrame(underlay4a, underlay4b, 4789, inner, pktOpts{}))
	f.Add(vxlanFrame(underlay6a, underlay6b, 4789, inner, pktOpts{}))
	f.Add(inner)
	f.Add(make([]byte, 14))
	progs := []struct {
		name string
		prog *ebpf.Program
	}{
		{"fpath_nic_in", fp.objs.FpathNicIn}, {"fpath_veth_eg", fp.objs.FpathVethEg}, {"fpath_pod_in", fp.objs.FpathPodIn},
		{"fpath_pod_eg", fp.objs.FpathPodEg}, {"fpath_veth_in", fp.objs.FpathVethIn}, {"fpath_nic_eg", fp.objs.FpathNicEg},
	}
	f.Fuzz(func(t *testing.T, pkt []byte) {
		// A test run takes an Ethernet header at least, and a page at most.
		if len(pkt) < 14 || len(pkt) > 1514 {
			return
		}
		for _, p := range progs {
			opts := &ebpf.RunOptions{Data: bytes.Clone(pkt), DataOut: make([]byte, len(pkt)+256)}
			ret, err := p.prog.Run(opts)
			if errors.Is(err, unix.EINVAL) {
				// The test run's own checks (an IP ethertype with no
				// room for its header): no program ran.
				t.Skipf("%s: BPF_PROG_TEST_RUN refuses this packet: %v", p.name, err)
			}
			if err != nil {
				t.Fatalf("%s: test run: %v", p.name, err)
			}
			out := opts.DataOut
			switch ret {
			case tcActUnspec:
				if !bytes.Equal(out, pkt) {
					t.Fatalf("%s passed\n%x\nas\n%x\nthe slow path must get what came", p.name, pkt, out)
				}
			case tcActShot, tcActRedirect:
			default:
				t.Fatalf("%s returned %d on\n%x", p.name, ret, pkt)
			}
		}
	})
}
