package datapath

import (
	"sync"
	"time"
)

// Spent is how long a datapath has been in each running state since it
// was loaded, and how often it came back on the path or stood down. A
// benchmark takes it before and after a window to say whether falcon's
// decisions (the engagement test, standing down) fell inside the window
// or were settled before it.
type Spent struct {
	Loaded time.Duration
	// OnPath: the programs attached (not stood down); Engaged: attached
	// with steering engaged (adaptive: the engagement test found that it
	// pays; the paper policy never disengages).
	OnPath, Engaged       time.Duration
	Comebacks, StandDowns uint64
}

// Sub is s less an earlier reading: what happened in between.
func (s Spent) Sub(o Spent) Spent {
	return Spent{Loaded: s.Loaded - o.Loaded, OnPath: s.OnPath - o.OnPath, Engaged: s.Engaged - o.Engaged,
		Comebacks: s.Comebacks - o.Comebacks, StandDowns: s.StandDowns - o.StandDowns}
}

// spentClock accumulates Spent from the configurations put in force.
type spentClock struct {
	mu     sync.Mutex
	loaded time.Time
	since  time.Time // of the last change
	state  Config    // in force since then
	acc    Spent     // up to since
}

// set notes that cfg is in force from now; the first call starts the clock.
func (c *spentClock) set(cfg Config, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded.IsZero() {
		c.loaded, c.since, c.state = now, now, cfg
		return
	}
	c.acc = c.upTo(now)
	switch {
	case c.state.StoodDown && !cfg.StoodDown:
		c.acc.Comebacks++
	case !c.state.StoodDown && cfg.StoodDown:
		c.acc.StandDowns++
	}
	c.since, c.state = now, cfg
}

// upTo is the accumulated time up to now (c.mu held).
func (c *spentClock) upTo(now time.Time) Spent {
	s := c.acc
	s.Loaded = now.Sub(c.loaded)
	d := now.Sub(c.since)
	if !c.state.StoodDown {
		s.OnPath += d
		if c.state.Engaged || Unconditional(c.state.Policy) {
			s.Engaged += d
		}
	}
	return s
}

// Spent says how long the datapath spent in each state so far.
func (d *Datapath) Spent() Spent {
	d.spent.mu.Lock()
	defer d.spent.mu.Unlock()
	if d.spent.loaded.IsZero() {
		return Spent{}
	}
	return d.spent.upTo(time.Now())
}
