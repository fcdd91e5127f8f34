package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/falconnet/falcon/lab/benchprobe"
	"github.com/falconnet/falcon/lab/measure"
	"github.com/falconnet/falcon/lab/modes"
	"github.com/falconnet/falcon/lab/render"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/testbed"
	"github.com/falconnet/falcon/lab/workload"
)

// RunOptions are what the command adds to a Config.
type RunOptions struct {
	Version  string
	Command  string
	Progress *Progress
	// TestbedName names the i-th testbed; default "b<pid>-<i>", which
	// testbed turns into namespaces fb-b<pid>-<i>-h1 ….
	TestbedName func(i int) string
	// Checkpoint, when set, gets the results so far after each testbed, so
	// a long bench that is killed outright still leaves them behind.
	Checkpoint func(*schema.File) error
}

// Preflight checks what a run needs from the system — root, ip, the
// traffic tools, taskset, the modes' own needs, a writable place for the
// results — so that nothing is created for a run that cannot finish.
func Preflight(c schema.Config) error {
	if c.JSON != "" {
		dir := filepath.Dir(c.JSON)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("--json %s: directory %s does not exist", c.JSON, dir)
		}
	}
	if err := testbed.CheckSystem(); err != nil {
		return err
	}
	for _, l := range c.Layouts {
		if err := testbed.CheckLayout(l); err != nil {
			return err
		}
	}
	if err := workload.CheckTools(append(tools(c), "taskset")...); err != nil {
		return err
	}
	for _, name := range c.Modes {
		if m, err := modes.Lookup(name); err == nil {
			if p, ok := m.(modes.Preflighter); ok {
				if err := p.Preflight(); err != nil {
					return fmt.Errorf("mode %s: %w", name, err)
				}
			}
		}
	}
	return nil
}

// EstimateRun is the expected wall time of one run: warm-up, window, the
// tail the clients run past it (whole seconds), starting the tools, and
// sockperf's own two-second warm-up stage when it is used.
func EstimateRun(c schema.Config) time.Duration {
	d := time.Duration(c.Warmup+c.Duration) + measure.Tail
	d = (d+time.Second-1)/time.Second*time.Second + 500*time.Millisecond
	if contains(tools(c), "sockperf") {
		d += 2 * time.Second
	}
	return d
}

// Execute builds a fresh testbed for each layout × mode (with
// --interleave, for each layout), sets the mode up, runs the cases there,
// undoes the mode and removes the testbed — also when a step fails or ctx
// is cancelled (ctrl-C). It returns the results
// gathered, complete or not, and an error describing whatever failed.
func Execute(ctx context.Context, c schema.Config, o RunOptions) (*schema.File, error) {
	plan, skipped, err := Plan(c)
	if err != nil {
		return nil, err
	}
	if o.Progress == nil {
		o.Progress = NewProgress(os.Stderr, false, true, 0, 0)
	}
	if o.TestbedName == nil {
		pid := os.Getpid()
		o.TestbedName = func(i int) string { return fmt.Sprintf("b%d-%d", pid, i) }
	}
	f := &schema.File{Format: schema.Format, FalconVersion: o.Version, Started: time.Now().UTC().Truncate(time.Second),
		Command: o.Command, Machine: benchprobe.DescribeMachine(tools(c)), Config: c, Notes: skipped, Results: []schema.Result{}}
	for _, s := range skipped {
		o.Progress.Note("falcon-lab bench: %s", s)
	}
	in, err := measure.Start(c)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	r := &runner{cfg: c, p: o.Progress, in: in}
	for _, tp := range plan {
		r.totalCases += len(tp.Cases)
	}
	var errs []error
	groups := groupPlans(plan, c.Interleave)
	for i, g := range groups {
		if ctx.Err() != nil {
			break
		}
		res, err := r.group(ctx, g, o.TestbedName(i))
		f.Results = append(f.Results, res...)
		if err != nil {
			errs = append(errs, err)
		}
		if o.Checkpoint != nil && i < len(groups)-1 {
			f.Partial = true
			finish(f)
			err := o.Checkpoint(f)
			f.Partial = false
			if err != nil {
				o.Progress.Note("falcon-lab bench: saving results so far: %v", err)
			}
		}
	}
	if ctx.Err() != nil {
		f.Interrupted = true
		errs = append(errs, fmt.Errorf("interrupted; the testbeds were removed and the results so far kept"))
	}
	finish(f)
	return f, errors.Join(errs...)
}

// finish brings summaries and ratios up to date, also for cases that never
// ran (their summary is empty rather than missing).
func finish(f *schema.File) {
	f.Finished = time.Now().UTC().Truncate(time.Second)
	for i := range f.Results {
		f.Results[i].Summarize()
	}
	schema.Normalize(f.Results, f.Config.Baseline)
}

type runner struct {
	cfg        schema.Config
	p          *Progress
	totalCases int
	caseNo     int
	in         *measure.Instruments
}

// A session is one mode set up on a testbed and the runs measured under it:
// grouped, every run of every case of a layout × mode; interleaved, one run
// of each case (sessions.go).
type session struct {
	plan  int // index into the group's plans
	items []item
}

// item is one run of one case: results[res] gets run number run.
type item struct{ res, run int }

// group runs plans that share a testbed (one plan, or with --interleave
// every mode of a layout) on a testbed of its own, session by session.
func (r *runner) group(ctx context.Context, plans []TestbedPlan, name string) (results []schema.Result, err error) {
	g := &groupRun{runner: r, plans: plans, name: name}
	g.newResults()
	g.what = plans[0].Layout + "/" + plans[0].Mode
	if len(plans) > 1 {
		g.what = plans[0].Layout + ", modes interleaved"
	}
	r.p.Stage("%s: testbed %s up", g.what, name)
	tb, err := testbed.Up(ctx, testbed.Spec{Name: name, Layout: plans[0].Layout, Containers: plans[0].Containers, IPv6: r.cfg.IPv6})
	if err != nil {
		return g.fail(err)
	}
	defer func() {
		r.p.Stage("%s: testbed %s down", g.what, name)
		if derr := testbed.Down(name); derr != nil {
			err = errors.Join(err, fmt.Errorf("remove testbed %s: %w (retry with 'falcon-lab testbed down --name %s')", name, derr, name))
		}
	}()
	g.tb = tb
	if r.cfg.ClientHostRPS != schema.ClientHostRPSOff {
		if err := tb.KeepSenderHostOn(r.cfg.SenderCPUs); err != nil {
			return g.fail(fmt.Errorf("sender host RPS: %w", err))
		}
	}
	if r.cfg.NICCPU != nil {
		if g.pin, err = tb.PinNIC(*r.cfg.NICCPU); err != nil {
			return g.fail(fmt.Errorf("--nic-cpu: %w", err))
		}
	}
	g.clients, g.servers = tb.Endpoints()
	if len(g.clients) == 0 || len(g.servers) == 0 {
		return g.fail(fmt.Errorf("testbed %s has no endpoints", name))
	}
	for _, s := range sessions(plans, r.cfg.Runs, r.cfg.Interleave) {
		if ctx.Err() != nil {
			break
		}
		if err := g.session(ctx, s); err != nil {
			// The next session would measure on a testbed this mode
			// still changes: stop here.
			return g.fail(errors.Join(err, failedRuns(g.failed, g.what)))
		}
	}
	return g.results, failedRuns(g.failed, g.what)
}

// groupRun is one group's testbed and the results of its cases.
type groupRun struct {
	*runner
	plans    []TestbedPlan
	name     string
	what     string // "docker/falcon", for the progress and errors
	results  []schema.Result
	offsets  []int // offsets[i] is where plans[i]'s cases start in results
	caseBase int   // the cases of the groups before this one
	tb       *testbed.Testbed
	clients  []testbed.Endpoint
	servers  []testbed.Endpoint
	pin      *testbed.NICPin
	failed   int // runs that failed or were skipped
}

// newResults lays out a result for every case of every plan.
func (g *groupRun) newResults() {
	g.offsets = make([]int, len(g.plans))
	for i, tp := range g.plans {
		g.offsets[i] = len(g.results)
		for _, cs := range tp.Cases {
			res := schema.Result{Layout: cs.Layout, Mode: cs.Mode, Workload: cs.Workload, Size: cs.Size, Flows: cs.Flows,
				Testbed: g.name, Runs: []schema.Run{}}
			switch w, _ := workload.Lookup(cs.Workload); {
			case w.Pairs == workload.ClientsToOne:
				res.Clients = g.cfg.Clients
			case workload.AtRate(cs.Workload):
				res.Rate = g.cfg.Rate
			}
			describeCase(&res, cs, g.cfg)
			g.results = append(g.results, res)
		}
	}
	g.caseBase = g.caseNo
	g.caseNo += len(g.results)
}

// fail marks the cases that cannot run; they still appear in the
// results, so a reader sees what is missing and why.
func (g *groupRun) fail(err error) ([]schema.Result, error) {
	for i := range g.results {
		if len(g.results[i].Runs) == 0 && len(g.results[i].Errors) == 0 {
			g.results[i].Errors = []string{err.Error()}
			g.p.Skip(g.cfg.Runs)
		}
	}
	return g.results, err
}

// session sets a mode up, measures the session's runs under it and
// undoes it; an error is an undo that failed, which ends the group.
func (g *groupRun) session(ctx context.Context, s session) error {
	tp := g.plans[s.plan]
	// skip records why the session's runs did not happen.
	skip := func(err error) {
		for _, it := range s.items {
			res := &g.results[g.offsets[s.plan]+it.res]
			res.Errors = append(res.Errors, fmt.Sprintf("run %d: %v", it.run, err))
		}
		g.p.Skip(len(s.items))
		g.failed += len(s.items)
	}
	m, err := modes.Lookup(tp.Mode)
	if err != nil {
		skip(err)
		return nil
	}
	m = modes.WithFalconCPUs(m, g.cfg.FalconCPUs)
	g.p.Stage("%s/%s: mode setup", tp.Layout, tp.Mode)
	su, err := m.Setup(ctx, g.tb)
	if err != nil {
		skip(fmt.Errorf("mode %s on %s: %w", tp.Mode, tp.Layout, err))
		return nil
	}
	for _, it := range s.items {
		if ctx.Err() != nil || !g.run(ctx, s.plan, it, su) {
			break
		}
	}
	if su.Undo != nil {
		g.p.Stage("%s/%s: mode undo", tp.Layout, tp.Mode)
		if uerr := su.Undo(); uerr != nil {
			return fmt.Errorf("undo mode %s on testbed %s: %w", tp.Mode, g.name, uerr)
		}
	}
	return nil
}

// run measures one run of one case; false when ctrl-C cut it short.
func (g *groupRun) run(ctx context.Context, plan int, it item, su modes.SetUp) bool {
	cs := g.plans[plan].Cases[it.res]
	res := &g.results[g.offsets[plan]+it.res]
	r := measure.Run{Config: g.cfg, Testbed: g.tb, Case: cs, Clients: g.clients, Servers: g.servers, N: it.run, Mode: su, Instruments: g.in}
	if res.Endpoints == nil {
		res.Endpoints = measure.Endpoints(r)
	}
	g.p.Stage("case %d/%d %s · run %d/%d", g.caseBase+g.offsets[plan]+it.res+1, g.totalCases, cs, it.run, g.cfg.Runs)
	var rec schema.Run
	var err error
	if g.pin != nil {
		err = g.pin.Ensure()
	}
	if err == nil {
		rec, err = g.measure(ctx, r, cs)
	}
	if ctx.Err() != nil {
		return false // a run cut short by ctrl-C measures nothing
	}
	if err != nil {
		g.failed++
		res.Errors = append(res.Errors, fmt.Sprintf("run %d: %v", it.run, err))
		g.p.RunDone(fmt.Sprintf("%s run %d/%d failed: %v", cs, it.run, g.cfg.Runs, err))
		return true
	}
	rec.Round = it.run
	res.Runs = append(res.Runs, rec)
	g.p.RunDone(fmt.Sprintf("%s run %d/%d: %s", cs, it.run, g.cfg.Runs, render.RunLine(rec)))
	return true
}

// stealRepeats bounds --max-steal's repeats of one run.
const stealRepeats = 3

// measure measures a run, again while another guest's load took more than
// --max-steal of a CPU from it: such a window measures the hypervisor's
// neighbours, and it falls on one mode of a round, not on all.
func (g *groupRun) measure(ctx context.Context, r measure.Run, cs measure.Case) (schema.Run, error) {
	for n := 0; ; n++ {
		rec, err := measure.Measure(ctx, r)
		if err != nil {
			return rec, err
		}
		rec.StealRepeats, rec.StealPct = n, maxSteal(rec)
		if g.cfg.MaxStealPct <= 0 || rec.StealPct <= g.cfg.MaxStealPct || n == stealRepeats || ctx.Err() != nil {
			return rec, nil
		}
		g.p.Note("%s run %d: steal %.0f %% > --max-steal %g: measured again", cs, r.N, rec.StealPct, g.cfg.MaxStealPct)
	}
}

// maxSteal is the largest share of a CPU the hypervisor took in a run.
func maxSteal(rec schema.Run) float64 {
	m := 0.0
	for _, c := range rec.CPU {
		m = max(m, c.Usage.Steal)
	}
	return m
}

func failedRuns(n int, what string) error {
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%d run(s) on %s failed (see the results)", n, what)
}
