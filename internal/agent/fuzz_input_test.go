package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/quote"
)

// FuzzParseRate: a rate (--elephant) is a finite number of bit/s up to
// 1000G or an error quoting a short prefix; formatRate writes it back as
// parseRate reads it.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"1G", "500M", "0", "2.5G", "1e9", "100 kbit/s", "3bps", "NaN", "Inf", "-1", "1e400", "0x1p30", "1001G", "G", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseRate(s)
		if err != nil {
			if len(err.Error()) > errBound {
				t.Fatalf("parseRate: %d bytes of error", len(err.Error()))
			}
			return
		}
		if r > 1e12 {
			t.Fatalf("parseRate(%q) = %d, beyond 1000G", s, r)
		}
		if back, err := parseRate(formatRate(r)); err != nil || back != r {
			t.Fatalf("parseRate(%q) = %d; formatRate %q reads back as %d, %v", s, r, formatRate(r), back, err)
		}
	})
}

// FuzzMetricsAddr: --metrics-addr's form is HOST:PORT with a port from 0
// to 65535, or an error quoting a short prefix. (Whether the host
// resolves is a DNS lookup, not fuzzed.)
func FuzzMetricsAddr(f *testing.F) {
	for _, s := range []string{"127.0.0.1:9750", ":9750", "[::1]:9750", "localhost:http", "9750", "127.0.0.1:99999", "[::1", ":-1", "a:b:c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		host, err := splitMetricsAddr(s)
		if err != nil {
			if len(err.Error()) > errBound {
				t.Fatalf("%d bytes of error", len(err.Error()))
			}
			return
		}
		if len(host) > len(s) || !strings.Contains(s, host) {
			t.Fatalf("splitMetricsAddr(%q) = host %q", s, host)
		}
	})
}

// FuzzReadState: a state file of any content is a state or an error,
// never a panic.
func FuzzReadState(f *testing.F) {
	b, err := os.ReadFile("testdata/reports.json")
	if err == nil {
		f.Add(b)
	}
	for _, s := range []string{`{"pid":1,"options":{"netns":"x","cpus":[0,1]},"pin_dir":"/sys/fs/bpf/falcon/ns-4-1","hooks":[{}]}`, `{"pid":`, "", "null", `{"options":{"cpus":[-1,99999999]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, stateFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
		readState(dir)
	})
}

// errBound is the most an error about one value may say: a message
// around two short quotes of it (quote.Short, at most 4 bytes a byte).
const errBound = 2*(4*quote.Max+8) + 200

var keyForm = regexp.MustCompile(`^ns-[0-9]+-[0-9]+$`)

// FuzzKey: whatever --netns says, its key is ns-DEV-INODE or an error
// quoting a short prefix; no name becomes a path of falcon's own.
func FuzzKey(f *testing.F) {
	for _, s := range []string{"", "host", "testbeds", ".", "..", "/proc/self/ns/net", "/proc/1/ns/net", "/dev/null", "/run/netns/x", "a/../../etc", "global.lock", strings.Repeat("x", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := Key(s)
		if err != nil {
			if len(err.Error()) > errBound {
				t.Fatalf("%d bytes of error", len(err.Error()))
			}
			return
		}
		if !keyForm.MatchString(k) {
			t.Fatalf("Key(%q) = %q", s, k)
		}
	})
}

// FuzzParseHolds: global.json of any content is holds or an error, never
// a panic, and holds written back read as the same.
func FuzzParseHolds(f *testing.F) {
	for _, s := range []string{`[{"path":"/proc/sys/net/core/rps_sock_flow_entries","old":"0","value":"32768","holders":["/run/falcon/ns-4-1"]}]`,
		`[{"path":"/proc/sys/kernel/core_pattern","old":"|/tmp/x"}]`, `[`, "", "null", `[null]`, `{"path":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		hs, err := parseHolds(b)
		if err != nil {
			return
		}
		again, err := json.Marshal(hs)
		if err != nil {
			t.Fatal(err)
		}
		back, err := parseHolds(again)
		if err != nil || !reflect.DeepEqual(back, hs) {
			t.Fatalf("%+v read back as %+v (%v)", hs, back, err)
		}
	})
}
