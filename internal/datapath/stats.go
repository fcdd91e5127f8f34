package datapath

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cilium/ebpf"
)

// ProgStats is what one program instance cost. The kernel counts only while
// BPF run-time statistics are on: ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
// (for as long as its fd is open) or sysctl kernel.bpf_stats_enabled=1.
type ProgStats struct {
	Hook     Hook // zero when read from another process
	RunCount uint64
	RunTime  time.Duration
}

// PerRun is the mean cost of one run (one packet).
func (s ProgStats) PerRun() time.Duration {
	if s.RunCount == 0 {
		return 0
	}
	return s.RunTime / time.Duration(s.RunCount)
}

func mapsJoin(ms ...map[hookKey]*attachment) []*attachment {
	var out []*attachment
	for _, m := range ms {
		for _, a := range m {
			out = append(out, a)
		}
	}
	return out
}

// ProgramStats reports each attached hook's program, split hooks included.
func (d *Datapath) ProgramStats() ([]ProgStats, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []ProgStats
	for _, a := range mapsJoin(d.hooks, d.splits) {
		s, err := progStats(a.prog)
		if err != nil {
			return nil, err
		}
		s.Hook = a.hook
		out = append(out, s)
	}
	return out, nil
}

func progStats(p *ebpf.Program) (ProgStats, error) {
	st, err := p.Stats()
	if err != nil {
		return ProgStats{}, fmt.Errorf("BPF program statistics: %w", err)
	}
	return ProgStats{RunCount: st.RunCount, RunTime: st.Runtime}, nil
}

// ReadProgramStats sums the statistics of every falcon program loaded on
// the machine, whichever process loaded them (falcon status, falcon-lab bench),
// by program name: "falcon_steer" (tc hooks), "falcon_split" (XDP) and the
// guard's: "falcon_arrive" (tc, on the containers' ends) and
// "falcon_guard_*", which run for all of the machine's traffic (every NAPI
// poll, every drop), and the fast path's "fpath_*" (tc hooks and its NAPI
// poll tracepoint).
func ReadProgramStats() (map[string]ProgStats, error) {
	out := map[string]ProgStats{}
	var id ebpf.ProgramID
	for {
		var err error
		id, err = ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("list BPF programs: %w", err)
		}
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // gone meanwhile
		}
		info, ierr := p.Info()
		name := ""
		if ierr == nil {
			name = info.Name
		}
		if name == progName || name == splitProgName || name == arriveProgName || name == atNICProgName || strings.HasPrefix(name, "falcon_guard_") ||
			strings.HasPrefix(name, fastPrefix) {
			if s, serr := progStats(p); serr == nil {
				t := out[name]
				t.RunCount += s.RunCount
				t.RunTime += s.RunTime
				out[name] = t
			}
		}
		p.Close()
	}
}
