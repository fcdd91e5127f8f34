package procfs

import (
	"os"
	"path/filepath"
	"testing"
)

// The parsers read files the kernel writes, but also recorded ones and
// those of kernels falcon never saw: whatever the bytes, they return a
// value or an error, never panic. The seed corpus is testdata's recorded
// files (it runs in every go test); make fuzz explores from it.

func addFiles(f *testing.F, pattern string) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed files %s: %v", pattern, err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzParseStat(f *testing.F) {
	addFiles(f, "stat-*")
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseStat(b)
		if err != nil {
			return
		}
		for cpu, c := range st.CPU {
			if cpu < 0 {
				t.Fatalf("CPU %d", cpu)
			}
			u := Usage(CPUTimes{}, c)
			if busy := u.Busy(); busy < -1e-9 || busy > 100+1e-9 {
				t.Fatalf("CPU %d busy %v%%", cpu, busy)
			}
		}
		Window(Snapshot{Stat: st}, Snapshot{Stat: st})
	})
}

func FuzzParseSoftnet(f *testing.F) {
	addFiles(f, "softnet_stat-*")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSoftnet(b)
		if err != nil {
			return
		}
		st := Stat{CPU: map[int]CPUTimes{}}
		for _, x := range s {
			if x.CPU < 0 {
				t.Fatalf("CPU %d", x.CPU)
			}
			st.CPU[x.CPU] = CPUTimes{}
		}
		Window(Snapshot{Stat: st, Softnet: s}, Snapshot{Stat: st, Softnet: s})
	})
}

func FuzzParseSNMP(f *testing.F) {
	addFiles(f, "snmp")
	addFiles(f, "netstat")
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseSNMP(b)
	})
}

func FuzzParseFragMemory(f *testing.F) {
	addFiles(f, "sockstat*")
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := ParseFragMemory(b); err == nil && v < 0 {
			t.Fatalf("memory %d", v)
		}
	})
}

// FuzzParsePerCPU covers /proc/softirqs and /proc/interrupts, one layout.
func FuzzParsePerCPU(f *testing.F) {
	addFiles(f, "softirqs-*")
	addFiles(f, "interrupts-*")
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseSoftirqs(b)
		if err != nil {
			return
		}
		st := Stat{CPU: map[int]CPUTimes{}}
		for _, row := range m {
			for cpu := range row {
				st.CPU[cpu] = CPUTimes{}
			}
		}
		s := Snapshot{Stat: st, Softirqs: m, Interrupts: Interrupts(m)}
		Window(s, s)
	})
}
