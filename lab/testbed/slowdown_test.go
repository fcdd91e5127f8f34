package testbed

import (
	"testing"
	"time"
)

func TestSlowdown(t *testing.T) {
	for _, c := range []struct {
		env  string
		want time.Duration
		bad  bool
	}{{"", time.Second, false}, {"1", time.Second, false}, {"10", 10 * time.Second, false},
		{"0", time.Second, true}, {"x", time.Second, true}, {"1.5", time.Second, true}, {"101", time.Second, true}} {
		t.Setenv(SlowdownEnv, c.env)
		_, err := slowdown()
		if (err != nil) != c.bad {
			t.Errorf("%s=%q: error %v, want one: %v", SlowdownEnv, c.env, err, c.bad)
		}
		if got := slowed(time.Second); got != c.want {
			t.Errorf("%s=%q: a second waits %s, want %s", SlowdownEnv, c.env, got, c.want)
		}
	}
}
