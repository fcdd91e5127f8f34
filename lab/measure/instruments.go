package measure

import (
	"errors"
	"fmt"
	"io"

	"github.com/cilium/ebpf"
	"github.com/falconnet/falcon/lab/probes"
	"github.com/falconnet/falcon/lab/schema"
	"golang.org/x/sys/unix"
)

// Instruments are what one bench turns on for all its runs, before any
// testbed: BPF run-time statistics (--bpf-stats) and the stage-cost timer
// (--stage-cost). Started first, a kernel that cannot run them fails the
// bench before anything is built.
type Instruments struct {
	stats io.Closer
	cost  *probes.StageCost
}

// Start turns on what c asks for; Close turns it off.
func Start(c schema.Config) (*Instruments, error) {
	in := &Instruments{}
	if c.BPFStats {
		// Held by fd: the statistics switch off again when the bench ends,
		// however it ends, and kernel.bpf_stats_enabled is never touched.
		st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
		if err != nil {
			return nil, fmt.Errorf("--bpf-stats: enable BPF run-time statistics: %w", err)
		}
		in.stats = st
	}
	if c.StageCost {
		var err error
		if in.cost, err = probes.StartStageCost(); err != nil {
			return nil, errors.Join(fmt.Errorf("--stage-cost: %w", err), in.Close())
		}
	}
	return in, nil
}

// Close turns the instruments off.
func (in *Instruments) Close() error {
	var errs []error
	if in.cost != nil {
		errs = append(errs, in.cost.Close())
	}
	if in.stats != nil {
		errs = append(errs, in.stats.Close())
	}
	return errors.Join(errs...)
}
