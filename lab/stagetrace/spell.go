package stagetrace

import (
	"fmt"
	"strconv"
	"strings"
)

// The spellings of Options' filters on a command line (falcon-lab trace).

// ParseProto reads "tcp", "udp" or "all" as Options.Proto.
func ParseProto(s string) (uint8, error) {
	switch s {
	case "all":
		return 0, nil
	case "tcp":
		return 6, nil
	case "udp":
		return 17, nil
	}
	return 0, fmt.Errorf("must be tcp, udp or all, not %q", s)
}

// ParsePortRange reads "PORT" or "LO-HI" as Options.PortMin and PortMax.
func ParsePortRange(s string) (lo, hi uint16, err error) {
	l, h, isRange := strings.Cut(s, "-")
	if !isRange {
		h = l
	}
	a, err1 := strconv.ParseUint(l, 10, 16)
	b, err2 := strconv.ParseUint(h, 10, 16)
	if err1 != nil || err2 != nil || a == 0 || a > b {
		return 0, 0, fmt.Errorf("%q: want PORT or LO-HI with 1 <= LO <= HI <= 65535", s)
	}
	return uint16(a), uint16(b), nil
}

// ParsePorts reads a comma-separated list of ports, as Options.VXLANPorts;
// "" is none.
func ParsePorts(s string) ([]uint16, error) {
	ports := []uint16{}
	for _, p := range strings.Split(s, ",") {
		if p == "" {
			continue
		}
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%q is not a port", p)
		}
		ports = append(ports, uint16(n))
	}
	return ports, nil
}

// ParseDevice reads "NETNS/DEV" (Device.String).
func ParseDevice(s string) (Device, error) {
	ns, dev, ok := strings.Cut(s, "/")
	if !ok || dev == "" {
		return Device{}, fmt.Errorf("%q: want NETNS/DEV (NETNS empty for the current namespace)", s)
	}
	return Device{Netns: ns, Name: dev}, nil
}
