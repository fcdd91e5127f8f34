package doctor

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/netns"
)

// inNS prefixes a command so that it runs in namespace ns, the way a user
// would type it: ip -n for named namespaces, nsenter for paths.
func inNS(ns, cmd string) string {
	switch {
	case ns == "":
		return cmd
	case strings.Contains(ns, "/"):
		return "nsenter --net=" + ns + " " + cmd
	case strings.HasPrefix(cmd, "ip "):
		return "ip -n " + ns + " " + strings.TrimPrefix(cmd, "ip ")
	default:
		return "ip netns exec " + ns + " " + cmd
	}
}

// onOff renders a feature change as ethtool arguments, in a stable order.
func onOff(names []string, on bool) string {
	v := "off"
	if on {
		v = "on"
	}
	var parts []string
	for _, n := range names {
		parts = append(parts, n+" "+v)
	}
	return strings.Join(parts, " ")
}

func ethtoolCmd(d *devState, names []string, on bool) string {
	return inNS(d.Netns, "ethtool -K "+d.Name+" "+onOff(names, on))
}

// setFeatures returns a fix that sets features of d by ifindex (the name
// may have changed since the snapshot) and reads them back.
func setFeatures(d *devState, names []string, on bool) func() error {
	ns, idx := d.Netns, d.Ifindex
	return func() error {
		return netns.Do(ns, func() error {
			l, err := netlink.LinkByIndex(idx)
			if err != nil {
				return err
			}
			name := l.Attrs().Name
			et, err := ethtool.NewEthtool()
			if err != nil {
				return err
			}
			defer et.Close()
			want := map[string]bool{}
			for _, n := range names {
				want[n] = on
			}
			if err := et.Change(name, want); err != nil {
				return fmt.Errorf("ethtool -K %s %s: %w", name, onOff(names, on), err)
			}
			got, err := et.Features(name)
			if err != nil {
				return err
			}
			for _, n := range names {
				if got[n] != on {
					return fmt.Errorf("%s: %s is still %v after the change (the driver refused it)", name, n, got[n])
				}
			}
			return nil
		})
	}
}

// setMTU returns a fix that sets the MTU of d by ifindex.
func setMTU(d *devState, mtu int) func() error {
	ns, idx := d.Netns, d.Ifindex
	return func() error {
		return netns.Do(ns, func() error {
			l, err := netlink.LinkByIndex(idx)
			if err != nil {
				return err
			}
			return netlink.LinkSetMTU(l, mtu)
		})
	}
}

// writeProc returns a fix that writes value to a /proc/sys file of the
// current (host) namespace.
func writeProc(path string, value int) func() error {
	return func() error {
		return os.WriteFile(path, []byte(strconv.Itoa(value)+"\n"), 0o644)
	}
}
