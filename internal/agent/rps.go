package agent

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/journal"
	"github.com/falconnet/falcon/internal/netns"
)

// QueuePaths returns the sysfs paths of attribute attr (journal.RPSCPUs,
// journal.RPSFlowCnt) of every receive queue of device dev. It must run where
// /sys shows dev's namespace (journal.ApplyFunc, netns.WithSysfs): drivers
// allocate more queues than they use (veth: one per possible CPU, of which
// one is real), and only the real ones are in sysfs.
func QueuePaths(dev, attr string) ([]string, error) {
	qs, err := filepath.Glob(journal.QueueGlob(dev, attr))
	if err != nil {
		return nil, err
	}
	if len(qs) == 0 {
		if _, err := os.Stat(filepath.Join("/sys/class/net", dev)); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s has no receive queue with %s: this kernel has no RPS (CONFIG_RPS), which falcon needs", dev, attr)
	}
	return qs, nil
}

// RPSChanges returns, for journal.ApplyFunc, the changes that make every
// receive queue of dev steer to cpus with RPS, and with flowCnt "0" turn RFS
// off there (RFS, when configured, is tried before RPS and would override
// the CPU falcon chose); flowCnt "" leaves RFS alone.
func RPSChanges(dev string, cpus []int, flowCnt string) func() ([]journal.Change, error) {
	return func() ([]journal.Change, error) {
		var cs []journal.Change
		qs, err := QueuePaths(dev, journal.RPSCPUs)
		if err != nil {
			return nil, err
		}
		for _, p := range qs {
			cs = append(cs, journal.Change{Path: p, Value: cpuset.Mask(cpus)})
		}
		if flowCnt != "" {
			qs, err := QueuePaths(dev, journal.RPSFlowCnt)
			if err != nil {
				return nil, err
			}
			for _, p := range qs {
				cs = append(cs, journal.Change{Path: p, Value: flowCnt})
			}
		}
		return cs, nil
	}
}

// checkRPS fails clearly when the kernel has no RPS (CONFIG_RPS) for d.
func checkRPS(d discover.Device) error {
	err := netns.WithSysfs(d.Netns, func(string) error {
		_, err := QueuePaths(d.Name, journal.RPSCPUs)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", d, err)
	}
	return nil
}

// checkOverlay checks what both steering modes need: a VXLAN device, a NIC
// under it, and RPS in the kernel.
func checkOverlay(h *Host, ov *discover.Overlay) error {
	vxs := ov.Role(discover.RoleOverlay)
	if len(vxs) == 0 {
		return fmt.Errorf("%w in network namespace %s", discover.ErrNoOverlay, netns.Label(h.Opts.Netns))
	}
	if len(ov.Role(discover.RoleNIC)) == 0 {
		return fmt.Errorf("no NIC found under the VXLAN devices (%s); name it with --devices", ov.Warnings)
	}
	if err := checkRPS(vxs[0]); err != nil {
		return err
	}
	return nil
}
