package workload

import (
	"math/big"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"16": 16, "1400": 1400, "4K": 4096, "4k": 4096, "4KiB": 4096,
		"64K": 65536, "65507": 65507, "128K": 128 << 10, "1M": 1 << 20, " 16 ": 16} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "8", "15", "-16", "x", "4G", "2M", "1.5K", "K", "17592186044417M"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
	for n, want := range map[int]string{16: "16 B", 1400: "1400 B", 4096: "4 KiB", 65507: "65507 B", 1 << 20: "1 MiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// FuzzParseSize: a size is bytes in range or an error; FormatSize writes it
// the way ParseSize reads it.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"16", "1400", "4K", "4KiB", "64k", "1M", "65507", "16 B", "4 KiB", "1 MiB", "0", "-4K", "2M", "4KB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		if n < MinSize || n > MaxSize {
			t.Fatalf("ParseSize(%q) = %d, out of range", s, n)
		}
		// No unit makes a size smaller than its number.
		digits := strings.TrimLeft(strings.TrimSpace(s), "+")
		if i := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
			digits = digits[:i]
		}
		if num, ok := new(big.Int).SetString(digits, 10); ok && num.Cmp(big.NewInt(int64(n))) > 0 {
			t.Fatalf("ParseSize(%q) = %d, less than the number written", s, n)
		}
		if back, err := ParseSize(FormatSize(n)); back != n || err != nil {
			t.Fatalf("ParseSize(%q) = %d; FormatSize %q reads back as %d, %v", s, n, FormatSize(n), back, err)
		}
	})
}
