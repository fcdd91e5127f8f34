package datapath

import (
	"testing"
	"time"
)

func TestSpentClock(t *testing.T) {
	var c spentClock
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	c.set(Config{}, at(0))                               // attached, not engaged
	c.set(Config{Engaged: true}, at(2))                  // engaged
	c.set(Config{StoodDown: true}, at(5))                // off the path
	c.set(Config{StoodDown: true, Engaged: true}, at(6)) // still off
	c.set(Config{}, at(9))                               // back, not engaged
	got := c.upTo(at(10))
	want := Spent{Loaded: 10 * time.Second, OnPath: 6 * time.Second, Engaged: 3 * time.Second, Comebacks: 1, StandDowns: 1}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if d := got.Sub(c.upTo(at(9.5))); d.OnPath != 500*time.Millisecond || d.Engaged != 0 || d.Comebacks != 0 {
		t.Fatalf("last half second: %+v", d)
	}
	var p spentClock
	p.set(Config{Policy: PolicyPaper}, at(0))
	if s := p.upTo(at(4)); s.Engaged != 4*time.Second {
		t.Fatalf("paper policy steers whenever attached: %+v", s)
	}
}
