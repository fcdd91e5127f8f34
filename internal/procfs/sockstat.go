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

// ParseFragMemory is the memory that IP fragment reassembly holds, in
// bytes, from /proc/net/sockstat ("FRAG: inuse N memory M") or sockstat6
// ("FRAG6: ...").
func ParseFragMemory(b []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || (f[0] != "FRAG:" && f[0] != "FRAG6:") {
			continue
		}
		for i := 1; i+1 < len(f); i += 2 {
			if f[i] == "memory" {
				v, err := strconv.ParseInt(f[i+1], 10, 64)
				if err != nil || v < 0 {
					return 0, fmt.Errorf("sockstat: %s memory %q is not a byte count", f[0], f[i+1])
				}
				return v, nil
			}
		}
		return 0, fmt.Errorf("sockstat: %q has no memory field", sc.Text())
	}
	return 0, errors.New("sockstat: no FRAG line")
}

// ReadFragMemory is what IPv4 and IPv6 fragment reassembly hold in a
// network namespace ("" is falcon's own): datagrams of which some
// fragments arrived and the rest may never, kept until ipfrag_time
// (ip6frag_time) expires them.
func ReadFragMemory(ns string) (int64, error) {
	var n int64
	for _, file := range []string{"sockstat", "sockstat6"} {
		b, err := netns.ReadProcNet(ns, file)
		if err != nil {
			if file == "sockstat6" && errors.Is(err, fs.ErrNotExist) {
				continue // IPv6 disabled
			}
			return 0, fmt.Errorf("read /proc/net/%s in netns %q: %w", file, ns, err)
		}
		v, err := ParseFragMemory(b)
		if err != nil {
			return 0, fmt.Errorf("/proc/net/%s in netns %q: %w", file, ns, err)
		}
		n += v
	}
	return n, nil
}
