package probes

import (
	"os"
	"testing"
)

func TestParseNetDev(t *testing.T) {
	b, err := os.ReadFile("testdata/netdev.txt")
	if err != nil {
		t.Fatal(err)
	}
	devs, err := parseNetDev(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 4 || devs["v1"].RxPackets != 2 || devs["lo"].RxPackets != 6 || devs["vx0"] != (devCounters{}) {
		t.Errorf("parsed %+v", devs)
	}
	if _, err := parseNetDev([]byte("garbage\n")); err == nil {
		t.Error("garbage parsed")
	}
	if _, err := parseNetDev(append(b, "  x0: 1 2 3\n"...)); err == nil {
		t.Error("short line parsed")
	}
}
