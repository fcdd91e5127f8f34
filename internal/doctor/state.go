package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/netns"
)

// state is one snapshot of everything the checks look at, so that checks
// are plain functions of it and a fix can be verified by taking another.
type state struct {
	ov   *discover.Overlay
	devs []*devState
	// sockFlowEntries is net.core.rps_sock_flow_entries, -1 if unreadable
	// (it exists only in the initial network namespace).
	sockFlowEntries int
}

type devState struct {
	discover.Device
	feat    map[string]ethtool.FeatureState
	featErr error
	driver  string
	queues  []rxQueue
	sysErr  error
	vxlan   *netlink.Vxlan   // overlay devices
	xdp     *netlink.LinkXdp // attached program, if any
	gone    bool
	// NIC only.
	xdpFeatures uint64
	xdpErr      error
	hasV4       bool
	hasV6       bool
}

type rxQueue struct {
	name    string // rx-0
	cpus    string // rps_cpus as the kernel prints it
	flowCnt int    // rps_flow_cnt
}

// active reports whether feature name is on; ok is false when the device
// does not report it.
func (d *devState) active(name string) (on, ok bool) {
	f, ok := d.feat[name]
	return f.Active, ok
}

// changeable reports whether ethtool may turn feature name on or off.
func (d *devState) changeable(name string) bool { return d.feat[name].Available }

func (st *state) role(r discover.Role) []*devState {
	var out []*devState
	for _, d := range st.devs {
		if d.Role == r {
			out = append(out, d)
		}
	}
	return out
}

func (st *state) find(ns string, idx int) *devState {
	for _, d := range st.devs {
		if d.Netns == ns && d.Ifindex == idx {
			return d
		}
	}
	return nil
}

func gather(ov *discover.Overlay) (*state, error) {
	st := &state{ov: ov, sockFlowEntries: -1}
	byNS := map[string][]*devState{}
	var order []string
	for _, dev := range ov.Devices {
		d := &devState{Device: dev}
		st.devs = append(st.devs, d)
		if _, ok := byNS[dev.Netns]; !ok {
			order = append(order, dev.Netns)
		}
		byNS[dev.Netns] = append(byNS[dev.Netns], d)
	}
	for _, ns := range order {
		if !netns.Exists(ns) {
			for _, d := range byNS[ns] {
				d.gone = true
			}
			continue
		}
		if err := netns.Do(ns, func() error { return gatherLinks(byNS[ns]) }); err != nil {
			return nil, fmt.Errorf("network namespace %s: %w", netns.Label(ns), err)
		}
		if err := netns.WithSysfs(ns, func(root string) error {
			for _, d := range byNS[ns] {
				if !d.gone {
					d.queues, d.sysErr = readQueues(root, d.Name)
				}
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("sysfs of network namespace %s: %w", netns.Label(ns), err)
		}
	}
	// Devices that went away since discovery are not findings.
	st.devs = slices.DeleteFunc(st.devs, func(d *devState) bool { return d.gone })
	if b, err := os.ReadFile(sockFlowPath); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			st.sockFlowEntries = n
		}
	}
	return st, nil
}

// gatherLinks runs inside the devices' namespace.
func gatherLinks(devs []*devState) error {
	h, err := netlink.NewHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	et, err := ethtool.NewEthtool()
	if err != nil {
		return fmt.Errorf("ethtool: %w", err)
	}
	defer et.Close()
	for _, d := range devs {
		l, err := h.LinkByIndex(d.Ifindex)
		if err != nil {
			d.gone = true // a container went away since discovery
			continue
		}
		a := l.Attrs()
		// Names change (CNIs rename veths); the ifindex is what discovery
		// pinned down.
		d.Name, d.MTU = a.Name, a.MTU
		d.xdp = a.Xdp
		if vx, ok := l.(*netlink.Vxlan); ok {
			d.vxlan = vx
		}
		d.feat, d.featErr = et.FeaturesWithState(d.Name)
		d.driver, _ = et.DriverName(d.Name)
		if d.Role == discover.RoleNIC {
			d.xdpFeatures, d.xdpErr = datapath.XDPFeatures("", d.Ifindex) // in this namespace already
			addrs, _ := h.AddrList(l, netlink.FAMILY_ALL)
			for _, ad := range addrs {
				if ad.IP.IsLinkLocalUnicast() {
					continue
				}
				if ad.IP.To4() != nil {
					d.hasV4 = true
				} else {
					d.hasV6 = true
				}
			}
		}
	}
	return nil
}

func readQueues(root, dev string) ([]rxQueue, error) {
	dirs, err := filepath.Glob(filepath.Join(root, "class/net", dev, "queues/rx-*"))
	if err != nil || len(dirs) == 0 {
		return nil, fmt.Errorf("no rx queues of %s in sysfs", dev)
	}
	sort.Slice(dirs, func(i, j int) bool { return queueNum(dirs[i]) < queueNum(dirs[j]) })
	var qs []rxQueue
	for _, dir := range dirs {
		q := rxQueue{name: filepath.Base(dir)}
		b, err := os.ReadFile(filepath.Join(dir, "rps_cpus"))
		if err != nil {
			// Kernels without CONFIG_RPS have no such file.
			return nil, err
		}
		q.cpus = strings.TrimSpace(string(b))
		if b, err = os.ReadFile(filepath.Join(dir, "rps_flow_cnt")); err == nil {
			q.flowCnt, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		qs = append(qs, q)
	}
	return qs, nil
}

func queueNum(dir string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "rx-"))
	return n
}
