package procfs

import (
	"bufio"
	"bytes"
	"fmt"
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

// ReadSNMP reads /proc/net/snmp and /proc/net/netstat as seen from network
// namespace ns ("" = current) and merges them; their section names differ.
func ReadSNMP(ns string) (SNMP, error) {
	out := SNMP{}
	for _, file := range []string{"snmp", "netstat"} {
		b, err := netns.ReadProcNet(ns, file)
		if err != nil {
			return nil, fmt.Errorf("read /proc/net/%s in netns %q: %w", file, ns, err)
		}
		s, err := ParseSNMP(b)
		if err != nil {
			return nil, fmt.Errorf("/proc/net/%s: %w", file, err)
		}
		for k, v := range s {
			out[k] = v
		}
	}
	return out, nil
}
