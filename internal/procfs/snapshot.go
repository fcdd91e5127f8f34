package procfs

import "encoding/json"

// Snapshot is every per-CPU counter bench records at each end of a
// measurement window.
type Snapshot struct {
	Stat       Stat
	Softirqs   Softirqs
	Interrupts Interrupts
	Softnet    []Softnet
}

// TakeSnapshot reads all counters of a Snapshot. The files are read one
// after the other; the skew between them is far below a window's length.
func TakeSnapshot() (Snapshot, error) {
	var s Snapshot
	var err error
	if s.Stat, err = ReadStat(); err != nil {
		return Snapshot{}, err
	}
	if s.Softirqs, err = ReadSoftirqs(); err != nil {
		return Snapshot{}, err
	}
	if s.Interrupts, err = ReadInterrupts(); err != nil {
		return Snapshot{}, err
	}
	if s.Softnet, err = ReadSoftnet(); err != nil {
		return Snapshot{}, err
	}
	return s, nil
}

// CPUWindow is what one CPU did between two snapshots. In JSON the usage
// fields sit next to the counters: {"usr":..,"sys":..,"net_rx":..}.
type CPUWindow struct {
	Usage          CPUUsage
	NetRX, NetTX   uint64 // NET_RX / NET_TX softirqs raised
	RES            uint64 // rescheduling IPIs received
	SoftnetDropped uint64
	TimeSqueeze    uint64
	ReceivedRPS    uint64
}

type cpuWindowJSON struct {
	CPUUsage
	NetRX          uint64 `json:"net_rx"`
	NetTX          uint64 `json:"net_tx"`
	RES            uint64 `json:"res"`
	SoftnetDropped uint64 `json:"softnet_dropped"`
	TimeSqueeze    uint64 `json:"time_squeeze"`
	ReceivedRPS    uint64 `json:"received_rps"`
}

func (w CPUWindow) MarshalJSON() ([]byte, error) {
	return json.Marshal(cpuWindowJSON{w.Usage, w.NetRX, w.NetTX, w.RES, w.SoftnetDropped, w.TimeSqueeze, w.ReceivedRPS})
}

func (w *CPUWindow) UnmarshalJSON(b []byte) error {
	var j cpuWindowJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*w = CPUWindow{j.CPUUsage, j.NetRX, j.NetTX, j.RES, j.SoftnetDropped, j.TimeSqueeze, j.ReceivedRPS}
	return nil
}

// Window is the per-CPU difference between two snapshots, keyed by CPU
// number, for every CPU /proc/stat lists in after. Counters missing in a
// snapshot (a CPU that went offline) or going backwards count as zero.
func Window(before, after Snapshot) map[int]CPUWindow {
	out := map[int]CPUWindow{}
	for cpu, a := range after.Stat.CPU {
		b, ok := before.Stat.CPU[cpu]
		if !ok {
			b = a
		}
		w := CPUWindow{Usage: Usage(b, a)}
		w.NetRX = rowDelta(before.Softirqs["NET_RX"], after.Softirqs["NET_RX"], cpu)
		w.NetTX = rowDelta(before.Softirqs["NET_TX"], after.Softirqs["NET_TX"], cpu)
		w.RES = rowDelta(before.Interrupts["RES"], after.Interrupts["RES"], cpu)
		sb, okb := softnetOf(before.Softnet, cpu)
		sa, oka := softnetOf(after.Softnet, cpu)
		if okb && oka {
			w.SoftnetDropped = sub(sb.Dropped, sa.Dropped)
			w.TimeSqueeze = sub(sb.TimeSqueeze, sa.TimeSqueeze)
			w.ReceivedRPS = sub(sb.ReceivedRPS, sa.ReceivedRPS)
		}
		out[cpu] = w
	}
	return out
}

func sub(before, after uint64) uint64 {
	if after < before {
		return 0
	}
	return after - before
}

func rowDelta(before, after []uint64, cpu int) uint64 {
	if cpu >= len(before) || cpu >= len(after) {
		return 0
	}
	return sub(before[cpu], after[cpu])
}

func softnetOf(s []Softnet, cpu int) (Softnet, bool) {
	for _, x := range s {
		if x.CPU == cpu {
			return x, true
		}
	}
	return Softnet{}, false
}

// SumWindows folds per-CPU windows into one for the whole machine:
// counters add up, and usage is the mean over CPUs (every CPU ticks at the
// same rate, so this equals the aggregate "cpu" line's share).
func SumWindows(w map[int]CPUWindow) CPUWindow {
	var t CPUWindow
	if len(w) == 0 {
		return t
	}
	for _, x := range w {
		t.Usage.Usr += x.Usage.Usr
		t.Usage.Sys += x.Usage.Sys
		t.Usage.Soft += x.Usage.Soft
		t.Usage.IRQ += x.Usage.IRQ
		t.Usage.Idle += x.Usage.Idle
		t.Usage.IOWait += x.Usage.IOWait
		t.Usage.Steal += x.Usage.Steal
		t.NetRX += x.NetRX
		t.NetTX += x.NetTX
		t.RES += x.RES
		t.SoftnetDropped += x.SoftnetDropped
		t.TimeSqueeze += x.TimeSqueeze
		t.ReceivedRPS += x.ReceivedRPS
	}
	n := float64(len(w))
	u := &t.Usage
	u.Usr, u.Sys, u.Soft, u.IRQ, u.Idle, u.IOWait, u.Steal = u.Usr/n, u.Sys/n, u.Soft/n, u.IRQ/n, u.Idle/n, u.IOWait/n, u.Steal/n
	return t
}
