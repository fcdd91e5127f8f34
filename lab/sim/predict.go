package sim

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
)

// PredictConfig is what to predict: every mode at every core count, flow
// count and offered load.
type PredictConfig struct {
	Cores []int
	Modes []string
	Flows []int
	Size  int
	// Loads are offered rates in multiples of one core's vanilla capacity
	// at Size (1e9 / the receive path's cost): 1 saturates a vanilla
	// NIC CPU.
	Loads []float64
}

// Point is one predicted case.
type Point struct {
	Cores      int     `json:"cores"`
	Mode       string  `json:"mode"`
	Flows      int     `json:"flows"`
	Load       float64 `json:"load"`
	OfferedPPS float64 `json:"offered_pps"`
	Outcome
}

// Prediction is a simulated result file: every number in it is the
// model's, none was measured.
type Prediction struct {
	Simulated     bool      `json:"simulated"` // always true
	Label         string    `json:"label"`
	FalconVersion string    `json:"falcon_version"`
	Created       time.Time `json:"created"`
	Calibration   string    `json:"calibration"` // the file, and the machine it measured
	Costs         Costs     `json:"costs"`       // at the size predicted
	Placement     string    `json:"placement"`
	Size          int       `json:"size"`
	Points        []Point   `json:"points"`
}

// SimulatedLabel heads every simulated figure.
const SimulatedLabel = "SIMULATED: falcon-lab sim's model, calibrated on measured stage costs; not a measurement"

// PlaceFor is the receiving host the model predicts on n cores: its
// senders are another machine; CPU 0 takes the NIC's interrupts, the next
// half of the rest (at least one) runs the applications, the others are
// the Falcon set (and rps's CPUs); with no CPU left over, every CPU is.
func PlaceFor(n int) Placement {
	if n == 1 {
		return Placement{NIC: 0, Receiver: []int{0}, Falcon: []int{0}}
	}
	rest := make([]int, 0, n-1)
	for c := 1; c < n; c++ {
		rest = append(rest, c)
	}
	r := max(1, len(rest)/2)
	p := Placement{NIC: 0, Receiver: rest[:r], Falcon: rest[r:]}
	if len(p.Falcon) == 0 {
		p.Falcon = append([]int{0}, rest...)
	}
	return p
}

// Check validates a prediction's configuration before anything runs.
func (pc PredictConfig) Check() error {
	if len(pc.Cores) == 0 || len(pc.Modes) == 0 || len(pc.Flows) == 0 || len(pc.Loads) == 0 {
		return fmt.Errorf("want at least one core count, mode, flow count and load")
	}
	for _, n := range pc.Cores {
		if n < 1 || n > 1024 {
			return fmt.Errorf("cores %d: want 1..1024", n)
		}
	}
	for _, f := range pc.Flows {
		if f < 1 || f > 4096 {
			return fmt.Errorf("flows %d: want 1..4096", f)
		}
	}
	for _, l := range pc.Loads {
		if !(l > 0 && l <= 1000) {
			return fmt.Errorf("load %v: want a multiple of one core's capacity, above 0 and at most 1000", l)
		}
	}
	for _, m := range pc.Modes {
		if _, err := ParseMode(m); err != nil {
			return err
		}
	}
	if pc.Size < 1 || pc.Size > 65507 {
		return fmt.Errorf("size %d: want 1..65507 bytes of UDP payload", pc.Size)
	}
	return nil
}

// Predict runs every case of pc with the calibration's costs at pc.Size,
// reporting progress to progress (nil: none).
func Predict(cal *Calibration, source string, pc PredictConfig, progress func(done, total int)) (Prediction, error) {
	if err := pc.Check(); err != nil {
		return Prediction{}, err
	}
	c := cal.Costs.At(pc.Size)
	capacity := 1e9 / (c.Build + c.NIC + c.VXLAN + c.Container)
	m := cal.File.Machine
	out := Prediction{Simulated: true, Label: SimulatedLabel, FalconVersion: cal.File.FalconVersion, Created: time.Now().UTC(),
		Calibration: fmt.Sprintf("%s: %d CPUs (%s), kernel %s, %s", source, m.Cores, m.CPUModel, m.Kernel, orNone(m.Virt)),
		Costs:       c, Size: pc.Size,
		Placement: "senders on another machine (Poisson arrivals); CPU 0 the NIC's interrupts; the next half of the rest " +
			"(at least one) the receiving applications, flows round robin; the others the Falcon set and rps_cpus"}
	type job struct {
		i int
		s Setup
	}
	var jobs []job
	for _, n := range pc.Cores {
		for _, name := range pc.Modes {
			mode, _ := ParseMode(name)
			for _, f := range pc.Flows {
				for _, l := range pc.Loads {
					out.Points = append(out.Points, Point{Cores: n, Mode: name, Flows: f, Load: l, OfferedPPS: l * capacity})
					jobs = append(jobs, job{len(jobs), Setup{CPUs: n, Place: PlaceFor(n), Mode: mode, Flows: f, Size: pc.Size,
						Rate: l * capacity, Duration: 100 * time.Millisecond, Warmup: 50 * time.Millisecond, Seed: 1}})
				}
			}
		}
	}
	var (
		mu   sync.Mutex
		done int
		err  error
		wg   sync.WaitGroup
		next = make(chan job)
	)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				o, e := Run(j.s, c)
				mu.Lock()
				if e != nil && err == nil {
					err = e
				}
				out.Points[j.i].Outcome = o
				done++
				if progress != nil {
					progress(done, len(jobs))
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	return out, err
}

// Text is a prediction as a table, its label first.
func (p Prediction) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\ncalibration: %s\nplacement: %s\n", SimulatedLabel, p.Calibration, p.Placement)
	c := p.Costs
	fmt.Fprintf(&b, "costs at %d B, ns: send %.0f, NIC build %.0f + rest %.0f, VXLAN %.0f, container %.0f, app %.0f, "+
		"hand-over %.0f+%.0f, hook %.0f, XDP %.0f, softirq share %.2f\n",
		p.Size, c.Send, c.Build, c.NIC, c.VXLAN, c.Container, c.App, c.HandoffTx, c.HandoffRx, c.Hook, c.XDP, c.SoftShare)
	fmt.Fprintf(&b, "%5s %-24s %5s %6s %10s %10s %7s %9s %9s\n", "cores", "mode", "flows", "load", "offered", "delivered", "loss%", "p50 µs", "p99 µs")
	for _, pt := range p.Points {
		fmt.Fprintf(&b, "%5d %-24s %5d %6.2f %10.0f %10.0f %7.1f %9.1f %9.1f\n", pt.Cores, pt.Mode, pt.Flows, pt.Load,
			pt.OfferedPPS, pt.PPS, pt.LossPct, pt.P50Us, pt.P99Us)
	}
	return b.String()
}

// ReadPrediction reads a prediction file; ok is false when the file is
// none (a bench results file, say), with no error.
func ReadPrediction(b []byte) (p Prediction, ok bool, err error) {
	var probe struct {
		Simulated bool `json:"simulated"`
	}
	if json.Unmarshal(b, &probe) != nil || !probe.Simulated {
		return p, false, nil
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, true, fmt.Errorf("a prediction file, but: %w", err)
	}
	return p, true, nil
}
