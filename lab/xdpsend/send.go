package xdpsend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

// Options say what to send, from where, for how long.
type Options struct {
	Netns, Dev string // the sending host's namespace and its wire device
	CPU        int    // the CPU the sender runs on; -1: any
	// Templates take turns frame by frame (they differ in their headers
	// only, which the program writes into each frame); each carries Flows
	// flows (source ports base .. base+Flows-1).
	Templates []Template
	Flows     int
	Duration  time.Duration // at least one call of FirstBatch frames
}

// Each BPF_PROG_RUN call puts the program into the XDP dispatcher and
// takes it out again, and each change waits for an RCU grace period
// (about 5 ms on the 2-vCPU VM here, where calls of 16k frames left the
// sending CPU idle 40 % of the time). So calls are made long: the first
// sends FirstBatch frames, each next as many as the last rate sends in
// callTime, and no more than fit the time left.
const (
	FirstBatch = 1 << 14
	callTime   = time.Second
	maxBatch   = 1 << 26
)

// Sender is a loaded kernel sender. Sent may be read while Run runs.
type Sender struct {
	objs xdpsendObjects
	o    Options
}

// Load checks o and loads the program with its flows and port offsets.
func Load(o Options) (*Sender, error) {
	if len(o.Templates) == 0 {
		return nil, errors.New("kernel sender: no frame to send")
	}
	if len(o.Templates) > maxTemplates {
		return nil, fmt.Errorf("kernel sender: %d frames to send, at most %d", len(o.Templates), maxTemplates)
	}
	if o.Flows < 1 || o.Flows > 65535 {
		return nil, fmt.Errorf("kernel sender: %d flows per frame (1..65535)", o.Flows)
	}
	t0 := o.Templates[0]
	for _, t := range o.Templates[1:] {
		if t.InnerSport != t0.InnerSport || t.OuterSport != t0.OuterSport || len(t.Frame) != len(t0.Frame) {
			return nil, errors.New("kernel sender: the frames differ in layout or length (one program sends them all)")
		}
	}
	spec, err := loadXdpsend()
	if err != nil {
		return nil, err
	}
	set := map[string]any{
		"flows":           uint32(o.Flows),
		"ntemplates":      uint32(len(o.Templates)),
		"inner_sport_off": uint32(t0.InnerSport),
		"outer_sport_off": uint32(t0.OuterSport),
		"inner_base":      t0.Port(t0.InnerSport),
	}
	if t0.Encapsulated() {
		set["outer_base"] = t0.Port(t0.OuterSport)
	}
	for k, v := range set {
		if err := spec.Variables[k].Set(v); err != nil {
			return nil, fmt.Errorf("kernel sender: set %s: %w", k, err)
		}
	}
	s := &Sender{o: o}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("kernel sender: load: %w", err)
	}
	for i, t := range o.Templates {
		v := xdpsendTemplate{Len: uint32(t.HeaderLen())}
		copy(v.Hdr[:], t.Frame[:t.HeaderLen()])
		if err := s.objs.Templates.Put(uint32(i), &v); err != nil {
			s.Close()
			return nil, fmt.Errorf("kernel sender: template %d: %w", i, err)
		}
	}
	return s, nil
}

// maxTemplates is MAX_TEMPLATES in bpf/lab/xdpsend.c.
const maxTemplates = 64

// Close unloads the program.
func (s *Sender) Close() error { return s.objs.Close() }

// Sent is how many frames went to the device so far.
func (s *Sender) Sent() (uint64, error) {
	var n uint64
	err := s.objs.Frames.Get(&n)
	return n, err
}

// Run sends until the duration has passed or ctx ends (then it returns
// ctx's error), on a thread pinned to the sender's CPU in the sending
// host's namespace, and returns the frames sent.
func (s *Sender) Run(ctx context.Context) (uint64, error) {
	o := s.o
	err := netns.Do(o.Netns, func() error {
		ifi, err := net.InterfaceByName(o.Dev)
		if err != nil {
			return fmt.Errorf("wire device %s: %w", o.Dev, err)
		}
		if o.CPU >= 0 {
			var old, one unix.CPUSet
			if err := unix.SchedGetaffinity(0, &old); err != nil {
				return err
			}
			one.Set(o.CPU)
			if err := unix.SchedSetaffinity(0, &one); err != nil {
				return fmt.Errorf("pin the kernel sender to CPU %d: %w", o.CPU, err)
			}
			defer unix.SchedSetaffinity(0, &old)
		}
		t := o.Templates[0] // the payload of all; the program writes each frame's headers
		start := time.Now()
		end := start.Add(o.Duration)
		batch := uint32(FirstBatch)
		for first := true; first || time.Now().Before(end); first = false {
			if err := ctx.Err(); err != nil {
				return err
			}
			_, err := s.objs.FalconSend.Run(&ebpf.RunOptions{
				Data:    t.Frame,
				Repeat:  batch,
				Flags:   unix.BPF_F_TEST_XDP_LIVE_FRAMES,
				Context: xdpMD{DataEnd: uint32(len(t.Frame)), IngressIfindex: uint32(ifi.Index)},
			})
			if err != nil {
				return fmt.Errorf("kernel sender on %s: %w (live-frame mode needs Linux 5.18 or later; some sandbox kernels refuse it)", o.Dev, err)
			}
			// Live-frame mode reports no return value: a frame the
			// program refused (XDP_ABORTED) shows as one not counted.
			sent, err := s.Sent()
			if err != nil {
				return err
			}
			if sent == 0 {
				return fmt.Errorf("kernel sender on %s: the program sent none of %d frames: the frame does not fit its offsets", o.Dev, batch)
			}
			rate := float64(sent) / time.Since(start).Seconds()
			left := time.Until(end)
			batch = uint32(min(max(rate*min(callTime, left).Seconds(), FirstBatch), maxBatch))
		}
		return nil
	})
	n, serr := s.Sent()
	return n, errors.Join(err, serr)
}

// xdpMD is struct xdp_md, the context BPF_PROG_RUN takes for XDP: the
// frame's bounds and the device it is taken to arrive on, which XDP_TX in
// live-frame mode sends it out of.
type xdpMD struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}
