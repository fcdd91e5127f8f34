package procfs

import "testing"

func TestParseSoftnet(t *testing.T) {
	s, err := ParseSoftnet(read(t, "softnet_stat-2cpu"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Softnet{{CPU: 0, Processed: 0x14}, {CPU: 1, Processed: 0xe3e}}
	if len(s) != 2 || s[0] != want[0] || s[1] != want[1] {
		t.Errorf("got %+v, want %+v", s, want)
	}
}

func TestParseSoftnet4CPU(t *testing.T) {
	for _, f := range []string{"softnet_stat-4cpu", "softnet_stat-old"} {
		s, err := ParseSoftnet(read(t, f))
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != 4 {
			t.Fatalf("%s: %d lines", f, len(s))
		}
		got := s[3]
		want := Softnet{CPU: 3, Processed: 0xe41, Dropped: 3, ReceivedRPS: 30}
		if got != want {
			t.Errorf("%s: cpu3 = %+v, want %+v", f, got, want)
		}
	}
}

func TestParseSoftnetErrors(t *testing.T) {
	for _, in := range []string{"00000001 00000002\n", "0000001 zz 0000000\n"} {
		if _, err := ParseSoftnet([]byte(in)); err == nil {
			t.Errorf("ParseSoftnet(%q): no error", in)
		}
	}
}
