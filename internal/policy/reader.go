package policy

import (
	"slices"

	"github.com/falconnet/falcon/internal/cause"
)

// causeReader turns the kernel's counters into cause.Windows.
type causeReader struct {
	cpus  cause.Reader
	apps  cause.Apps
	recv  cause.Received
	nss   []string       // the namespaces counted at the last turn
	last  [2]uint64      // what they had received, and dropped, then
	nic   map[int]uint64 // CPU -> packets the NIC hooks saw there
	start bool
	// flowing: the last window had traffic (cause.Traffic).
	flowing bool
}

// read returns the window since the last read; false on the first.
func (c *causeReader) read(s Sensors) (cause.Window, bool) {
	cpus, ms, err := c.cpus.Read()
	if err != nil {
		return cause.Window{Ms: ms, Unreadable: err.Error()}, c.started()
	}
	down, engaged := s.Path()
	w := cause.Window{Ms: ms, CPUs: cpus, Engaged: engaged && !down}
	nss := s.Netns()
	if w.Delivered, w.SockDrops, err = c.received(nss); err != nil {
		w.Unreadable = err.Error()
	} else {
		if cause.Traffic(w) && !c.flowing {
			// A flow began: its socket may be newer than the last
			// listing, and its receiver is not known without it.
			c.apps.Relist()
		}
		if w.AppCPUs, err = c.apps.CPUs(nss); err != nil {
			w.Unreadable = err.Error()
		}
		w.Listed, w.NewSockets = c.apps.Fresh()
	}
	c.flowing = cause.Traffic(w)
	w.NICCPUs = c.nicCPUs(s, down, cpus)
	return w, c.started() && cpus != nil
}

func (c *causeReader) started() bool {
	was := c.start
	c.start = true
	return was
}

// received: what the namespaces' sockets received since the last turn
// (cause.Received); nothing where the namespaces changed.
func (c *causeReader) received(nss []string) (delivered, drops uint64, err error) {
	p, d, err := c.recv.Counts(nss)
	if err != nil {
		return 0, 0, err
	}
	same, prev := slices.Equal(nss, c.nss), c.last
	c.nss, c.last = slices.Clone(nss), [2]uint64{p, d}
	if !same {
		return 0, 0, nil
	}
	return sub(prev[0], p), sub(prev[1], d), nil
}

// nicCPUs: on the path, the CPUs where the NIC hooks saw a quarter or more
// of the busiest one's packets; stood down (or with no NIC hook), the
// CPUs that ran NET_RX most.
func (c *causeReader) nicCPUs(s Sensors, down bool, cpus []cause.CPU) []int {
	prev := c.nic
	c.nic = nil
	if down {
		return cause.NICByNetRx(cpus)
	}
	nic, err := s.NICPackets()
	if err != nil {
		return cause.NICByNetRx(cpus)
	}
	c.nic = nic
	d := map[int]uint64{}
	var top uint64
	for cpu, n := range c.nic {
		d[cpu] = sub(prev[cpu], n)
		top = max(top, d[cpu])
	}
	if prev == nil || top == 0 {
		return cause.NICByNetRx(cpus)
	}
	out := []int{}
	for cpu, n := range d {
		if 4*n >= top {
			out = append(out, cpu)
		}
	}
	slices.Sort(out)
	return out
}

func sub(a, b uint64) uint64 {
	if b < a {
		return 0 // a counter restarted (a comeback): no difference to speak of
	}
	return b - a
}

// maskLoad: engaged by cause, the datapath sees every CPU but the targets
// as full, so that the policy moves stages only to the targets (and
// moves a steered flow off a CPU that stopped being one). The set's
// average stays the real one.
func maskLoad(perCPU []uint32, targets []int) []uint32 {
	out := slices.Clone(perCPU)
	for i := range out {
		if !slices.Contains(targets, i) {
			out[i] = 100
		}
	}
	return out
}
