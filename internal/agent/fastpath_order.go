package agent

import (
	"maps"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/journal"
)

// Order on the sending host. A container's TCP sender transmits from two
// CPUs: the application's, and the one its ACKs arrive on (the ACK clock
// sends from the softirq). Without RPS, veth queues each packet on the
// backlog of the CPU that sent it, and the two backlogs drain on their
// own, so the host forwards the flow out of order: vanilla too, and more
// often with the fast path, whose shorter path lets one backlog overtake
// the other. With RPS on the container's host-side veth (sender-rps, on
// by default), every packet of a flow waits on one backlog, in the order
// it was sent; the programs at the container's end pick it by the hash
// they set: the flow's home, the CPU that sent its first data
// (bpf/fastpath_order.h). RPS's own hash picked a CPU by chance, on 2
// vCPUs the receiver's half the time: UDP stress at 16 B fell from
// 1.34-1.63 x vanilla to 0.60-1.19 x with drops (results/fastpath-2cpu-vm,
// "One backlog for the sender").

// syncSenderRPS sets RPS on the host-side veths the fast path serves (the
// programs learned its map at start) and restores it on those it no
// longer serves (restored first: a new veth may take a gone one's name).
// A veth that fails (its container going away) is logged and tried again
// at the next sync. Called with f.mu held.
func (f *fastPath) syncSenderRPS(h *Host) {
	if !h.Opts.SenderRPS {
		return
	}
	for k, name := range f.rps {
		if hk, ok := f.hooks[k]; ok && hk.Name == name {
			continue
		}
		delete(f.rps, k)
		if err := h.journal.RestoreWhere(f.ownsDevice(name)); err != nil {
			f.log.Warn("fast path: restore RPS of a host-side veth it no longer serves", "veth", name, "err", err)
		}
	}
	for k, hk := range f.hooks {
		if hk.Role != datapath.HookFastVeth || f.rps[k] != "" {
			continue
		}
		if err := h.ApplyFunc(f.ns, RPSChanges(hk.Name, h.Opts.CPUs, "")); err != nil {
			f.log.Warn("fast path: RPS not set on a container's host-side veth; flows it sends may leave the host reordered",
				"veth", hk.Name, "err", err)
			continue
		}
		f.rps[k] = hk.Name
	}
}

func (f *fastPath) ownsDevice(name string) func(journal.Entry) bool {
	return func(e journal.Entry) bool { return e.Netns == f.ns && e.Device() == name }
}

// notSenderRPS accepts the journal's entries other than the fast path's
// sender RPS: what steering restores when it stands down. It copies the
// set first, so that the journal's lock is never taken inside f.mu's
// reverse order.
func (f *fastPath) notSenderRPS() func(journal.Entry) bool {
	f.mu.Lock()
	names := map[string]bool{}
	for n := range maps.Values(f.rps) {
		names[n] = true
	}
	ns := f.ns
	f.mu.Unlock()
	return func(e journal.Entry) bool { return e.Netns != ns || !names[e.Device()] }
}
