package procfs

import (
	"os"
	"slices"
	"testing"
)

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseSoftirqs(t *testing.T) {
	s, err := ParseSoftirqs(read(t, "softirqs-2cpu"))
	if err != nil {
		t.Fatal(err)
	}
	if got := s["NET_RX"]; !slices.Equal(got, []uint64{1576, 2498}) {
		t.Errorf("NET_RX = %v", got)
	}
	if len(s) != 10 {
		t.Errorf("%d softirqs, want 10", len(s))
	}
	s, err = ParseSoftirqs(read(t, "softirqs-4cpu"))
	if err != nil {
		t.Fatal(err)
	}
	if got := s["NET_RX"]; !slices.Equal(got, []uint64{1576, 2498, 1583, 2509}) {
		t.Errorf("4 cpus: NET_RX = %v", got)
	}
}

func TestParseInterrupts(t *testing.T) {
	in, err := ParseInterrupts(read(t, "interrupts-2cpu"))
	if err != nil {
		t.Fatal(err)
	}
	for label, want := range map[string][]uint64{
		"RES": {10700, 5689}, "LOC": {34771, 36060}, "38": {0, 2541}, "ERR": {0},
	} {
		if got := in[label]; !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", label, got, want)
		}
	}
}

func TestParseInterruptsOfflineCPU(t *testing.T) {
	// CPU2 offline: the kernel omits its column, so values move by CPU number.
	in, err := ParseInterrupts(read(t, "interrupts-4cpu-cpu2-offline"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := in["RES"], []uint64{10700, 5689, 0, 5692}; !slices.Equal(got, want) {
		t.Errorf("RES = %v, want %v", got, want)
	}
	if got := in["ERR"]; !slices.Equal(got, []uint64{0}) {
		t.Errorf("ERR = %v", got)
	}
}

func TestParsePerCPUErrors(t *testing.T) {
	for _, in := range []string{
		"",
		"foo bar\n",
		"   CPU0 CPU1\n RES 1 2\n",
		"   CPU0 CPU1\n RES: x y Rescheduling\n",
	} {
		if _, err := ParseInterrupts([]byte(in)); err == nil {
			t.Errorf("ParseInterrupts(%q): no error", in)
		}
	}
}

func TestReadLive(t *testing.T) {
	s, err := ReadSoftirqs()
	if err != nil || len(s["NET_RX"]) == 0 {
		t.Fatalf("softirqs: %v %v", s, err)
	}
	in, err := ReadInterrupts()
	if err != nil || len(in) == 0 {
		t.Fatalf("interrupts: %v", err)
	}
	sn, err := ReadSoftnet()
	if err != nil || len(sn) == 0 {
		t.Fatalf("softnet: %v %v", sn, err)
	}
}
