package cpuset

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseFormat(t *testing.T) {
	for in, want := range map[string][]int{"0": {0}, "0,2": {0, 2}, "0-3": {0, 1, 2, 3}, "1-2,5,1": {1, 2, 5},
		" 6,0-1\n": {0, 1, 6}, "3,2,1": {1, 2, 3}} {
		got, err := Parse(in)
		if err != nil || !reflect.DeepEqual(got, Set(want)) {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a", "-1", "3-1", "1-", "0,,x", "0-99999999", "8192", "9223372036854775807"} {
		if got, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", in, got)
		}
	}
	for want, in := range map[string][]int{"0-2,5,7-8": {0, 1, 2, 5, 7, 8}, "3": {3}, "": nil, "1-3": {3, 2, 1, 2}} {
		if got := Format(in); got != want {
			t.Errorf("Format(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestMask(t *testing.T) {
	for want, in := range map[string][]int{"0": nil, "1": {0}, "f": {0, 1, 2, 3}, "a": {1, 3},
		"1,00000000": {32}, "80000000,00000001": {0, 63}} {
		if got := Mask(in); got != want {
			t.Errorf("Mask(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestOnlineAndCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	defer func(o, p string) { onlinePath, presentPath = o, p }(onlinePath, presentPath)
	onlinePath, presentPath = write("online", "0-1,3\n"), write("present", "0-3\n")
	if got, err := Online(); err != nil || !reflect.DeepEqual(got, Set{0, 1, 3}) {
		t.Errorf("Online() = %v, %v", got, err)
	}
	if err := Check([]int{0, 3}); err != nil {
		t.Errorf("Check(0,3): %v", err)
	}
	for cpus, msg := range map[int]string{2: "CPU 2 is offline (online: 0-1,3)", 7: "CPU 7 does not exist (this machine has CPUs 0-3)"} {
		if err := Check([]int{0, cpus}); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("Check(0,%d) = %v, want %q", cpus, err, msg)
		}
	}
}

// A long list costs memory and time by its length, never by the ranges
// it spells out: repeated wide ranges once cost 133 MB for 3.5 KB.
func TestParseBounded(t *testing.T) {
	for _, n := range []int{3 << 10, 1 << 20} {
		s := strings.Repeat("0-8191,", n/7) + "0"
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		set, err := Parse(s)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		if err != nil || len(set) != MaxID+1 {
			t.Fatalf("%d bytes: %d CPUs, %v", len(s), len(set), err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 10<<20 {
			t.Fatalf("%d bytes of list: %d MB allocated", len(s), alloc>>20)
		}
		if took > 2*time.Second {
			t.Fatalf("%d bytes of list: %v", len(s), took)
		}
	}
	_, err := Parse(strings.Repeat("x", 100_000))
	if err == nil || len(err.Error()) > 300 {
		t.Errorf("100 KB of bad list: %d bytes of error", len(err.Error()))
	}
}
