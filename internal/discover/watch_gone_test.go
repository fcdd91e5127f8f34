package discover

import (
	"context"
	"testing"
	"time"
)

// Watch's name stops naming the namespace it watches, deleted or made
// again as another: Watch reports Gone as its last event and returns, and
// reports nothing of the new namespace's devices, which are not the
// watcher's (an agent that followed them would change another's host).
func TestWatchEndsWhenNamespaceGoes(t *testing.T) {
	for _, remake := range []bool{false, true} {
		name := map[bool]string{false: "deleted", true: "remade"}[remake]
		t.Run(name, func(t *testing.T) {
			l := newLab(t, "g"+name[:1])
			overlay := `ip -n {h} link add br0 type bridge; ip -n {h} link set br0 up
ip -n {h} link add vxlan0 type vxlan id 256 dstport 4789 remote 192.168.77.2
ip -n {h} link set vxlan0 master br0 up`
			l.sh(overlay)
			events := make(chan Event, 100)
			done := make(chan error, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { done <- Watch(ctx, l.ns("h"), func(e Event) { events <- e }) }()
			waitEvent(t, events, Added)
			l.sh(`ip netns del {h}`)
			if remake {
				l.sh("ip netns add {h}\nip -n {h} link add hnic type veth peer name rnic\n" + overlay)
			}
			e := waitEvent(t, events, Gone)
			t.Logf("gone: %v", e.Err)
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Watch returned %v after Gone", err)
				}
			case <-time.After(20 * time.Second): // a hang guard
				t.Fatal("Watch still runs after reporting Gone")
			}
			close(events)
			for e := range events {
				t.Errorf("an event after Gone: %s %+v", e.Type, e.Device)
			}
		})
	}
}

// waitEvent returns the first event of type typ, failing on Failed.
func waitEvent(t *testing.T, events <-chan Event, typ EventType) Event {
	t.Helper()
	deadline := time.After(30 * time.Second) // a hang guard: Watch checks the name every 5 s
	for {
		select {
		case e := <-events:
			if e.Type == typ {
				return e
			}
			if e.Type == Failed {
				t.Fatalf("waiting for %s: %v", typ, e.Err)
			}
		case <-deadline:
			t.Fatalf("no %s event", typ)
		}
	}
}
