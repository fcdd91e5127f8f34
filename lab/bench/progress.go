package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Progress reports where a bench is: on a terminal one line redrawn in
// place (a bar, case i/N, run j/M, ETA), elsewhere one line per finished
// run, so logs stay readable. Notes (warnings) go through it too so they
// do not tear the bar.
type Progress struct {
	mu      sync.Mutex
	w       io.Writer
	tty     bool
	quiet   bool
	total   int // runs planned
	done    int
	started time.Time
	last    time.Time     // when the last run finished
	perRun  time.Duration // estimate until a run has finished
	line    string        // what the bar says besides counts
	label   string        // what every line starts with ("fig10 3/34 ")
	drawn   bool
	stop    chan struct{}
}

// NewProgress reports to w; tty selects the redrawn bar. perRun is the
// estimated time of one run, refined as runs finish.
func NewProgress(w io.Writer, tty, quiet bool, total int, perRun time.Duration) *Progress {
	p := &Progress{w: w, tty: tty, quiet: quiet, total: total, perRun: perRun, started: time.Now(), stop: make(chan struct{})}
	if tty && !quiet {
		go p.tick()
	}
	return p
}

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func (p *Progress) tick() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.draw()
			p.mu.Unlock()
		}
	}
}

// Label starts every progress line with s (paper-all: the figure).
func (p *Progress) Label(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label = s
}

// Stage says what is happening now ("docker/vanilla: testbed up", …).
func (p *Progress) Stage(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.line = fmt.Sprintf(format, a...)
	if p.tty {
		p.draw()
	}
}

// RunDone records a finished run; summary is shown on its own line when
// not on a terminal.
func (p *Progress) RunDone(summary string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	p.last = time.Now()
	if p.quiet {
		return
	}
	if p.tty {
		p.draw()
		return
	}
	fmt.Fprintf(p.w, "%s[%d/%d] %s\n", p.label, p.done, p.total, summary)
}

// Skip removes runs that will not happen (a testbed that failed) from the
// plan, so the ETA stays honest.
func (p *Progress) Skip(runs int) {
	p.mu.Lock()
	p.total -= runs
	p.mu.Unlock()
}

// Note prints a message on its own line, above the bar. Notes are shown
// even with --quiet: they are warnings.
func (p *Progress) Note(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprintf(p.w, format+"\n", a...)
	if p.tty && !p.quiet {
		p.draw()
	}
}

// Close removes the bar.
func (p *Progress) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.clear()
}

// eta assumes the runs left take as long as the ones done (or the
// estimate, before any), less what the current run has already taken.
func (p *Progress) eta() time.Duration {
	per, since := p.perRun, time.Since(p.started)
	if p.done > 0 {
		per, since = time.Since(p.started)/time.Duration(p.done), time.Since(p.last)
	}
	return max(0, time.Duration(p.total-p.done)*per-min(since, per))
}

func (p *Progress) draw() {
	if !p.tty || p.quiet {
		return
	}
	const width = 20
	filled := 0
	if p.total > 0 {
		filled = width * p.done / p.total
	}
	bar := strings.Repeat("#", filled) + strings.Repeat(".", width-filled)
	s := fmt.Sprintf("%s[%s] %d/%d runs  %s  ETA %s", p.label, bar, p.done, p.total, p.line, p.eta().Round(time.Second))
	fmt.Fprintf(p.w, "\r\033[K%s", s)
	p.drawn = true
}

func (p *Progress) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}
