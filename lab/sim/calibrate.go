package sim

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/falconnet/falcon/lab/schema"
)

// The calibration run's cases (bench.CalibratePreset): one iperf3 UDP
// flow on the docker layout, modes taking turns round by round. Its odd
// rounds calibrate; its even rounds are held out for validation.
const (
	calLayout   = "docker"
	calWorkload = "udp"
	// cutBuild puts everything after the wire's poll on the receiver's
	// CPU: RPS on the NIC and the VXLAN device with rps_cpus = CPU 1.
	cutBuild = "rps:rps-cpus=1"
)

// Calibration is the costs a calibration file measured, and the file.
type Calibration struct {
	File  *schema.File
	Costs CostTable
	Notes []string // how each cost was derived, and what was assumed
}

// calibrationRound says whether a round calibrates (odd) or is held out.
func calibrationRound(r int) bool { return r%2 == 1 }

// Calibrate derives the costs from a calibration file's odd rounds.
func Calibrate(f *schema.File) (*Calibration, error) {
	if f.Config.Calibrate == 0 {
		return nil, fmt.Errorf("not a calibration file (made by falcon-lab bench --calibrate): its config has no calibrate format")
	}
	if f.Config.Calibrate != schema.CalibrateFormat {
		return nil, fmt.Errorf("calibration format %d, made by another version of falcon (falcon %s); this one reads format %d: "+
			"run falcon-lab bench --calibrate again", f.Config.Calibrate, f.FalconVersion, schema.CalibrateFormat)
	}
	cal := &Calibration{File: f}
	sizes := map[int]bool{}
	for _, r := range f.Results {
		if r.Layout == calLayout && r.Workload == calWorkload && r.Mode == schema.Vanilla {
			sizes[r.Size] = true
		}
	}
	if len(sizes) == 0 {
		return nil, fmt.Errorf("no vanilla %s runs of the %s workload: nothing to calibrate from", calLayout, calWorkload)
	}
	var keys []int
	for s := range sizes {
		keys = append(keys, s)
	}
	sort.Ints(keys)
	for _, size := range keys {
		c, err := cal.costsAt(size)
		if err != nil {
			return nil, fmt.Errorf("size %d: %w", size, err)
		}
		cal.Costs = append(cal.Costs, c)
	}
	cal.Notes = append(cal.Notes,
		"stage costs: NET_RX softirq time per segment each stage was charged (bench --stage-cost), vanilla, odd rounds",
		"send/app: the sender's/receiver's CPU busy time outside NET_RX per datagram sent/received",
		"hand-over: both CPUs' NET_RX time per packet under "+cutBuild+" over vanilla's, the container stage's difference "+
			"(drops at a full socket) taken out; the tracer cannot tell the handing CPU's part from the taking one's: each is given half",
		"build: the interrupt CPU's NET_RX time per packet under "+cutBuild+", less the handing half",
		"drop: the container stage's time per datagram under "+cutBuild+", less the deliveries at vanilla's cost, over the datagrams its socket dropped",
		"softirq share, app busy: the receiver's CPU under "+cutBuild+", where softirq and application both wanted all of it: "+
			"its NET_RX time over its busy time, and its other busy time per datagram received",
		"hook, xdp: the falcon programs' run time (bench --bpf-stats)")
	if err := cal.Costs.Check(); err != nil {
		return nil, err
	}
	return cal, nil
}

// result finds a case of the calibration.
func (c *Calibration) result(mode string, size int) *schema.Result {
	for i, r := range c.File.Results {
		if r.Layout == calLayout && r.Workload == calWorkload && r.Mode == mode && r.Size == size && r.Flows <= 1 {
			return &c.File.Results[i]
		}
	}
	return nil
}

// runs are a case's runs of calibrating (cal true) or held-out rounds,
// failed ones left out.
func runs(r *schema.Result, cal bool) []schema.Run {
	if r == nil {
		return nil
	}
	var out []schema.Run
	for i, run := range r.Runs {
		round := run.Round
		if round == 0 {
			round = i + 1
		}
		if calibrationRound(round) == cal && run.PPS > 0 {
			out = append(out, run)
		}
	}
	return out
}

// perSeg is a window's NET_RX time per segment of each stage, summed over
// CPUs, the unattributed time ("backlog", "other") shared out over the
// stages that ran on its CPU by their time. With onCPU >= 0 only that
// CPU's share.
func perSeg(run schema.Run, onCPU int) map[string]float64 {
	ns := map[string]float64{}
	segs := map[string]float64{}
	byCPU := map[int]map[string]float64{}
	extra := map[int]float64{}
	for _, s := range run.Stages {
		if s.Stage == "backlog" || s.Stage == "other" {
			extra[s.CPU] += float64(s.Ns)
			continue
		}
		segs[s.Stage] += float64(s.Segs)
		if byCPU[s.CPU] == nil {
			byCPU[s.CPU] = map[string]float64{}
		}
		byCPU[s.CPU][s.Stage] += float64(s.Ns)
	}
	for cpu, m := range byCPU {
		var sum float64
		for _, v := range m {
			sum += v
		}
		for st, v := range m {
			if sum > 0 {
				v += extra[cpu] * v / sum
			}
			if onCPU < 0 || cpu == onCPU {
				ns[st] += v
			}
		}
	}
	out := map[string]float64{}
	for st, v := range ns {
		if segs[st] > 0 {
			out[st] = v / segs[st]
		}
	}
	return out
}

// threadTime is a CPU's busy time over a window outside NET_RX, ns: what
// the model's threads cost there. The model's softirq work is the stages'
// NET_RX time; any other kernel time a thread causes (other softirqs, the
// interrupts of its transmit) is the thread's.
func threadTime(run schema.Run, cpu int) float64 {
	w, ok := run.CPU[cpu]
	if !ok {
		return math.NaN()
	}
	u := w.Usage
	busy := (100 - u.Idle - u.IOWait - u.Steal) / 100 * run.WindowS * 1e9
	for _, s := range run.Stages {
		if s.CPU == cpu {
			busy -= float64(s.Ns)
		}
	}
	return max(0, busy)
}

func mean(xs []float64) float64 {
	var s float64
	n := 0
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			s += x
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return s / float64(n)
}

func (c *Calibration) costsAt(size int) (Costs, error) {
	cfg := c.File.Config
	if len(cfg.SenderCPUs) != 1 || len(cfg.ReceiverCPUs) != 1 || cfg.SenderCPUs[0] == cfg.ReceiverCPUs[0] {
		return Costs{}, fmt.Errorf("the calibration needs one sender CPU and another receiver CPU; the file has %v and %v",
			cfg.SenderCPUs, cfg.ReceiverCPUs)
	}
	snd, rcv := cfg.SenderCPUs[0], cfg.ReceiverCPUs[0]
	out, total, err := c.vanillaCosts(size, snd, rcv)
	if err != nil {
		return Costs{}, err
	}
	if err := c.cutCosts(&out, total, size, snd, rcv); err != nil {
		return Costs{}, err
	}
	if err := c.contendedCosts(&out, size, rcv); err != nil {
		return Costs{}, err
	}
	out.Hook = c.bpfCost("falcon_steer", size, "falcon", "falcon:policy=paper", "falcon+split")
	out.XDP = c.bpfCost("falcon_split", size, "falcon+split")
	for name, v := range map[string]float64{"nic": total, "vxlan": out.VXLAN, "container": out.Container, "send": out.Send, "app": out.App} {
		if math.IsNaN(v) || v <= 0 {
			return Costs{}, fmt.Errorf("no %s cost measured", name)
		}
	}
	return out, nil
}

// vanillaCosts are the stages' and the threads' costs per packet of
// vanilla's runs; total is the whole NIC stage's, which the cut splits.
func (c *Calibration) vanillaCosts(size, snd, rcv int) (out Costs, total float64, err error) {
	van := runs(c.result(schema.Vanilla, size), true)
	if len(van) == 0 {
		return Costs{}, 0, fmt.Errorf("no calibrating vanilla run")
	}
	var nic, vx, ct, send, app []float64
	for _, r := range van {
		if len(r.Stages) == 0 {
			return Costs{}, 0, fmt.Errorf("vanilla run of round %d has no stage costs (bench --stage-cost)", r.Round)
		}
		p := perSeg(r, -1)
		nic, vx, ct = append(nic, p["nic"]), append(vx, p["vxlan"]), append(ct, p["container"])
		if sent := r.Counters["tx.Udp.OutDatagrams"]; sent > 0 {
			send = append(send, threadTime(r, snd)/float64(sent))
		}
		if got := r.Counters["rx.Udp.InDatagrams"]; got > 0 {
			app = append(app, threadTime(r, rcv)/float64(got))
		}
	}
	return Costs{Size: size, VXLAN: mean(vx), Container: mean(ct), Send: mean(send), App: mean(app)}, mean(nic), nil
}

// cutCosts: the cut, per packet. The interrupt CPU's NET_RX time is the
// build and the handing half; the receiver CPU's the rest of the NIC
// stage, the taking half, the VXLAN stage and the container stage, whose
// datagrams mostly find their socket full there (deliveries at vanilla's
// cost, drops cheaper). CPU totals are what the tracer measures exactly;
// the stages only split them.
func (c *Calibration) cutCosts(out *Costs, total float64, size, snd, rcv int) error {
	var hand, build, drop []float64
	for _, r := range runs(c.result(cutBuild, size), true) {
		var segs, ctSegs, rx0, rx1 float64
		for _, s := range r.Stages {
			switch {
			case s.Stage == "nic":
				segs += float64(s.Segs)
			case s.Stage == "container":
				ctSegs += float64(s.Segs)
			}
			switch s.CPU {
			case snd:
				rx0 += float64(s.Ns)
			case rcv:
				rx1 += float64(s.Ns)
			}
		}
		if segs == 0 || ctSegs == 0 {
			continue
		}
		ct := perSeg(r, -1)["container"]
		h := rx0/segs + rx1/segs - (total + out.VXLAN + out.Container) - ct + out.Container
		hand = append(hand, h)
		build = append(build, rx0/segs-max(0, h)/2)
		if got := float64(r.Counters["rx.Udp.InDatagrams"]); got < 0.9*ctSegs {
			f := got / ctSegs
			drop = append(drop, (ct-f*out.Container)/(1-f))
		}
	}
	if len(hand) == 0 {
		return fmt.Errorf("no calibrating run of %s: the hand-over, the build and a drop's cost are measured there", cutBuild)
	}
	h := max(0, mean(hand))
	out.HandoffTx, out.HandoffRx = h/2, h/2
	out.Build = min(total, max(0, mean(build)))
	out.NIC = total - out.Build
	if out.ContainerDrop = mean(drop); math.IsNaN(out.ContainerDrop) || out.ContainerDrop <= 0 {
		out.ContainerDrop = out.Container
		c.Notes = append(c.Notes, fmt.Sprintf("size %d: no drop at a full socket measured: drops cost as much as deliveries", size))
	}
	return nil
}

// contendedCosts: under the cut the receiver's CPU runs the rest of the
// path and the application, both with more than it can take: the stages'
// NET_RX time there is the softirq's share against a busy thread, and the
// application, which then never waits for a datagram, pays less for each
// than vanilla's, which sleeps and is woken for most.
func (c *Calibration) contendedCosts(out *Costs, size, rcv int) error {
	var share, busyApp []float64
	for _, r := range runs(c.result(cutBuild, size), true) {
		w, ok := r.CPU[rcv]
		if !ok || w.Usage.Idle >= 5 {
			continue
		}
		u := w.Usage
		busy := (100 - u.Idle - u.IOWait - u.Steal) / 100 * r.WindowS * 1e9
		share = append(share, (busy-threadTime(r, rcv))/busy)
		if got := r.Counters["rx.Udp.InDatagrams"]; got > 0 {
			busyApp = append(busyApp, threadTime(r, rcv)/float64(got))
		}
	}
	if out.SoftShare, out.AppBusy = mean(share), mean(busyApp); math.IsNaN(out.SoftShare) || math.IsNaN(out.AppBusy) {
		return fmt.Errorf("no calibrating run of %s kept the receiver's CPU busy: the softirq's share of a contended CPU "+
			"and the application's cost when it never waits are measured there", cutBuild)
	}
	return nil
}

// bpfCost is a falcon program's mean run time in the modes' calibrating
// runs, 0 when none ran it or the file has no BPF statistics.
func (c *Calibration) bpfCost(prog string, size int, modes ...string) float64 {
	var xs []float64
	var all []schema.Run
	for _, m := range modes {
		all = append(all, runs(c.result(m, size), true)...)
	}
	for _, r := range all {
		// A run whose program time exceeds the machine's CPU time saw its
		// counters restart (a reload inside the window; files from before
		// bench took care of it).
		if b, ok := r.BPF[prog]; ok && b.Runs > 0 && float64(b.TimeNs) < r.WindowS*1e9*float64(max(1, c.File.Machine.Cores)) {
			xs = append(xs, b.NsPerRun)
		}
	}
	if v := mean(xs); !math.IsNaN(v) {
		return v
	}
	return 0
}

// Modes lists the modes of the calibration file's runs, vanilla first.
func (c *Calibration) Modes() []string {
	var out []string
	for _, r := range c.File.Results {
		if r.Layout == calLayout && r.Workload == calWorkload && !slices.Contains(out, r.Mode) {
			out = append(out, r.Mode)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i] == schema.Vanilla && out[j] != schema.Vanilla })
	return out
}
