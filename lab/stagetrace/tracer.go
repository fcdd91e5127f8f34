// Package stagetrace observes, on the real kernel datapath, which CPU runs
// each (flow, device) stage of the receive path, and whether a flow got
// reordered on its way to the socket's device.
//
// A BPF program on the tracepoint net:netif_receive_skb, which fires in
// __netif_receive_skb_core on the CPU that processes the packet for that
// device (after RPS), counts packets per (network namespace, device, inner
// flow) and CPU. VXLAN packets are counted under their inner 5-tuple, so a
// flow has one identity at the NIC, the VXLAN device and the container.
package stagetrace

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/falconnet/falcon/internal/steer"
)

// Tracepoints that hand over the skb as their first argument; the tracer
// can sit on any of them. Only netif_receive_skb runs on the CPU of the
// device's stage; the *_entry ones and netif_rx fire before RPS, on the CPU
// of the previous stage.
var Tracepoints = []string{
	"netif_receive_skb",
	"netif_receive_skb_entry",
	"netif_receive_skb_list_entry",
	"napi_gro_receive_entry",
	"napi_gro_frags_entry",
	"netif_rx_entry",
	"netif_rx",
}

// Options says what to trace. The zero value traces every IP packet at
// every device of every namespace on net:netif_receive_skb.
type Options struct {
	// Tracepoint of the net: group; default "netif_receive_skb".
	Tracepoint string
	// Netns restricts counting to these namespaces (names under /run/netns
	// or paths; "" is the caller's), NetnsInodes to these inodes.
	Netns       []string
	NetnsInodes []uint32
	// Count only TCP (6) or UDP (17); 0 counts every IP protocol.
	Proto uint8
	// Count only flows whose (inner) source or destination port lies in
	// [PortMin, PortMax]; both 0 counts all.
	PortMin, PortMax uint16
	// UDP destination ports that carry VXLAN; nil means 4789 and 8472.
	// At most 4.
	VXLANPorts []uint16
	// MaxFlows bounds the (namespace, device, flow) entries; default 16384.
	MaxFlows int
	// Seq names the last devices before the sockets (e.g. the
	// containers' eth0). Each flow's order is checked there: UDP packets are read as carrying a big-endian uint64
	// sequence number in their first 8 payload bytes (see
	// lab/seqcheck), and packets below the highest number already
	// seen in their flow are counted as reordered; TCP data segments over
	// IPv4 are numbered by their IP ID, which a connected socket's sender
	// counts up per segment in the order it transmits them (retransmits
	// get new ones), and a segment whose ID is below the next expected is
	// counted as reordered: unlike the receiver's out-of-order queue, a
	// loss is no reordering here.
	Seq []Device
	// SeqPaths records, for TCP over IPv4, each segment's way through the
	// devices counted (by the IP ID of the skb that carried it), so that a
	// reordered segment's First shows its path beside its predecessor's.
	// A map update per skb and device: for finding out, not for benches.
	SeqPaths bool

	rawOnly bool // skip tp_btf: tests of the fallback
}

// DefaultVXLANPorts are the VXLAN ports counted unless told.
var DefaultVXLANPorts = steer.DefaultVXLANPorts

const maxVXLANPorts = 4

// Tracer is a loaded and attached stage tracer.
type Tracer struct {
	coll  *ebpf.Collection
	link  link.Link
	tc    []link.Link // stage_tc on the sequence devices (seq_tc)
	hook  string
	names *resolver
	seq   bool // sequence devices were given (Options.Seq)
}

// Device is a network device in a namespace (a name under /run/netns or a
// path; "" is the caller's).
type Device struct{ Netns, Name string }

func (d Device) String() string { return d.Netns + "/" + d.Name }

// maxSeqDevices bounds Options.Seq (bpf/lab/stagetrace.c seq_devs).
const maxSeqDevices = 1024

type cfg struct {
	tp     string
	inodes []uint32
	vxlan  [maxVXLANPorts]uint16
	seq    []stagetraceSeqDev
}

// validate checks the options and resolves names, before anything is
// loaded into the kernel.
func (o Options) validate() (cfg, error) {
	c := cfg{tp: o.Tracepoint}
	if c.tp == "" {
		c.tp = "netif_receive_skb"
	}
	if !slices.Contains(Tracepoints, c.tp) {
		return c, fmt.Errorf("tracepoint %q not supported (one of %v)", o.Tracepoint, Tracepoints)
	}
	if o.Proto != 0 && o.Proto != 6 && o.Proto != 17 {
		return c, fmt.Errorf("protocol %d: want 6 (TCP), 17 (UDP) or 0 (all)", o.Proto)
	}
	if o.PortMin > o.PortMax {
		return c, fmt.Errorf("port range %d-%d is empty", o.PortMin, o.PortMax)
	}
	if o.MaxFlows < 0 {
		return c, fmt.Errorf("MaxFlows %d is negative", o.MaxFlows)
	}
	ports := o.VXLANPorts
	if ports == nil {
		ports = DefaultVXLANPorts
	}
	if len(ports) > maxVXLANPorts {
		return c, fmt.Errorf("%d VXLAN ports given, at most %d", len(ports), maxVXLANPorts)
	}
	for i, p := range ports {
		if p == 0 {
			return c, errors.New("VXLAN port 0 is not a port")
		}
		c.vxlan[i] = p
	}
	for _, ns := range o.Netns {
		ino, err := netnsInode(ns)
		if err != nil {
			return c, err
		}
		c.inodes = append(c.inodes, ino)
	}
	c.inodes = append(c.inodes, o.NetnsInodes...)
	if len(o.Seq) > maxSeqDevices {
		return c, fmt.Errorf("%d sequence devices, at most %d", len(o.Seq), maxSeqDevices)
	}
	for _, d := range o.Seq {
		if d.Name == "" {
			return c, fmt.Errorf("sequence device %q: no device named", d)
		}
		ino, err := netnsInode(d.Netns)
		if err != nil {
			return c, err
		}
		idx, err := devIndex(d.Netns, d.Name)
		if err != nil {
			return c, err
		}
		c.seq = append(c.seq, stagetraceSeqDev{Netns: ino, Ifindex: uint32(idx)})
	}
	return c, nil
}

// Start loads the BPF program and attaches it. It prefers a BTF
// tracepoint (tp_btf) and falls back to a raw tracepoint.
func Start(o Options) (*Tracer, error) {
	c, err := o.validate()
	if err != nil {
		return nil, err
	}
	var errs []error
	progs := []string{stagetraceProgStageBtf, stagetraceProgStageRaw}
	if o.rawOnly {
		progs = progs[1:]
	}
	// The order at the sequence devices' tc ingress where the kernel has
	// tcx and the kernel context, at the tracepoint otherwise (which
	// misses what bpf_redirect_peer delivers).
	for _, tc := range []bool{len(c.seq) > 0 && !o.rawOnly, false} {
		for _, prog := range progs {
			t, err := start(o, c, prog, tc)
			if err == nil {
				return t, nil
			}
			errs = append(errs, err)
		}
		if len(c.seq) == 0 || o.rawOnly {
			break
		}
	}
	return nil, fmt.Errorf("stage tracer: %w", errors.Join(errs...))
}

func start(o Options, c cfg, prog string, tc bool) (*Tracer, error) {
	spec, err := loadStagetrace()
	if err != nil {
		return nil, err
	}
	set := map[string]any{
		stagetraceVarVxlanPorts:    c.vxlan,
		stagetraceVarPortMin:       o.PortMin,
		stagetraceVarPortMax:       o.PortMax,
		stagetraceVarProtoFilter:   o.Proto,
		stagetraceVarNetnsFilterOn: boolByte(len(c.inodes) > 0),
		stagetraceVarSeqOn:         boolByte(len(c.seq) > 0),
		stagetraceVarSeqPaths:      boolByte(o.SeqPaths && len(c.seq) > 0),
		stagetraceVarSeqTc:         boolByte(tc),
	}
	for name, v := range set {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
	}
	if o.MaxFlows > 0 {
		spec.Maps[stagetraceMapStages].MaxEntries = uint32(o.MaxFlows)
	}
	spec.Programs[prog].AttachTo = c.tp
	// Load only the chosen program: a tp_btf program fails to load on a
	// kernel without BTF and must not take the raw_tp one down with it.
	for name := range spec.Programs {
		if name != prog && (name != stagetraceProgStageTc || !tc) {
			delete(spec.Programs, name)
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", prog, err)
	}
	t := &Tracer{coll: coll, seq: len(c.seq) > 0}
	for _, ino := range c.inodes {
		if err := coll.Maps[stagetraceMapNetnsFilter].Put(ino, uint8(1)); err != nil {
			coll.Close()
			return nil, fmt.Errorf("namespace filter: %w", err)
		}
	}
	for _, d := range c.seq {
		if err := coll.Maps[stagetraceMapSeqDevs].Put(d, uint8(1)); err != nil {
			coll.Close()
			return nil, fmt.Errorf("sequence devices: %w", err)
		}
	}
	p := coll.Programs[prog]
	if prog == stagetraceProgStageBtf {
		t.hook = "tp_btf/" + c.tp
		t.link, err = link.AttachTracing(link.TracingOptions{Program: p,
			AttachType: ebpf.AttachTraceRawTp})
	} else {
		t.hook = "raw_tp/" + c.tp
		t.link, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: c.tp, Program: p})
	}
	if err != nil {
		coll.Close()
		return nil, fmt.Errorf("attach %s: %w", t.hook, err)
	}
	if tc {
		if err := t.attachTC(o.Seq, coll.Programs[stagetraceProgStageTc]); err != nil {
			t.Close()
			return nil, err
		}
	}
	return t, nil
}

// Hook says where the program is attached, e.g. "tp_btf/netif_receive_skb".
func (t *Tracer) Hook() string { return t.hook }

// Close detaches the program and frees its maps.
func (t *Tracer) Close() error {
	if t == nil || t.coll == nil {
		return nil
	}
	errs := []error{t.link.Close()}
	for _, l := range t.tc {
		errs = append(errs, l.Close())
	}
	err := errors.Join(errs...)
	t.coll.Close()
	t.coll = nil
	return err
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
