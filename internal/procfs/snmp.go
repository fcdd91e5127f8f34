package procfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/falconnet/falcon/internal/netns"
)

// SNMP holds /proc/net/snmp or /proc/net/netstat: section ("Udp", "TcpExt")
// -> counter name -> value. Values are signed: Tcp MaxConn is -1.
type SNMP map[string]map[string]int64

// ParseSNMP parses the "Section: names" / "Section: values" line pairs that
// /proc/net/snmp and /proc/net/netstat share.
func ParseSNMP(b []byte) (SNMP, error) {
	out := SNMP{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		names := strings.Fields(sc.Text())
		if !sc.Scan() {
			return nil, fmt.Errorf("snmp: section %q has names but no values", names[0])
		}
		values := strings.Fields(sc.Text())
		if len(values) == 0 || names[0] != values[0] || !strings.HasSuffix(names[0], ":") {
			return nil, fmt.Errorf("snmp: header %q not followed by its values", names[0])
		}
		if len(names) != len(values) {
			return nil, fmt.Errorf("snmp: section %s: %d names but %d values", names[0], len(names)-1, len(values)-1)
		}
		sec := strings.TrimSuffix(names[0], ":")
		m := out[sec]
		if m == nil {
			m = map[string]int64{}
			out[sec] = m
		}
		for i := 1; i < len(names); i++ {
			n, err := strconv.ParseInt(values[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("snmp: %s %s: %w", sec, names[i], err)
			}
			m[names[i]] = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("snmp: %w", err)
	}
	return out, nil
}

// snmp6Sections are the sections of /proc/net/snmp6, longest first: its
// lines carry the section as the name's prefix ("Udp6InDatagrams 5").
var snmp6Sections = []string{"UdpLite6", "Icmp6", "Udp6", "Ip6"}

// ParseSNMP6 parses /proc/net/snmp6's "SectionName value" lines into
// sections named as there ("Udp6" -> "InDatagrams"), so that they sit
// beside /proc/net/snmp's; lines of other sections are left out.
func ParseSNMP6(b []byte) (SNMP, error) {
	out := SNMP{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("snmp6: line %q: want a name and a value", sc.Text())
		}
		for _, sec := range snmp6Sections {
			name, ok := strings.CutPrefix(f[0], sec)
			if !ok || name == "" {
				continue
			}
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("snmp6: %s: %w", f[0], err)
			}
			if out[sec] == nil {
				out[sec] = map[string]int64{}
			}
			out[sec][name] = n
			break
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("snmp6: %w", err)
	}
	return out, nil
}

// UDP is a UDP counter over IPv4 and IPv6 together: /proc/net/snmp's Udp
// counts IPv4 only, snmp6's Udp6 (same names) IPv6. TCP needs no such sum:
// its counters (Tcp, TcpExt) count both.
func (s SNMP) UDP(name string) int64 { return s["Udp"][name] + s["Udp6"][name] }

// ReadSNMP reads /proc/net/snmp, /proc/net/netstat and /proc/net/snmp6 as
// seen from network namespace ns ("" = current) and merges them; their
// section names differ. A kernel without IPv6 has no snmp6.
func ReadSNMP(ns string) (SNMP, error) {
	out := SNMP{}
	for _, file := range []string{"snmp", "netstat", "snmp6"} {
		b, err := netns.ReadProcNet(ns, file)
		if err != nil {
			if file == "snmp6" && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("read /proc/net/%s in netns %q: %w", file, ns, err)
		}
		parse := ParseSNMP
		if file == "snmp6" {
			parse = ParseSNMP6
		}
		s, err := parse(b)
		if err != nil {
			return nil, fmt.Errorf("/proc/net/%s: %w", file, err)
		}
		for k, v := range s {
			out[k] = v
		}
	}
	return out, nil
}
