package discover

import (
	"context"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	vns "github.com/vishvananda/netns"

	"github.com/falconnet/falcon/internal/netns"
)

// EventType says what happened to a device.
type EventType string

const (
	Added   EventType = "added"
	Removed EventType = "removed"
	Failed  EventType = "error" // discovery failed; Err says why
	// Gone: the watched name no longer names the namespace Watch started
	// in (deleted, or made again as another); Err says which. It is the
	// last event: whatever an agent set there went with the namespace or
	// is not the new one's to touch.
	Gone EventType = "gone"
)

// Event is a change of the overlay. Overlay is the whole overlay as found
// after the change.
type Event struct {
	Type    EventType
	Device  Device
	Overlay *Overlay
	Err     error
}

// How long Watch lets a burst of netlink messages (a container's veth is
// made, moved, renamed, enslaved and set up in a few milliseconds) settle
// before looking again, and how often it looks anyway. minGap keeps route
// churn on a busy node (BGP, many pods) from turning into back-to-back
// scans: a container is still seen well within a second. The kernel says
// when it dropped messages (the subscription fails, and a new one looks
// again), so the rescan is only a net under that: a discovery opens every
// namespace (4.5 ms of CPU with 8 of them and 78 processes on a 2-vCPU
// guest) and grows with the pods, while whether the watched name still
// names its namespace is a stat and a cookie, checked every nameCheck.
const (
	settle    = 50 * time.Millisecond
	minGap    = 250 * time.Millisecond
	nameCheck = 5 * time.Second
	rescan    = 30 * time.Second
)

// Watch follows the overlay of hostNS until ctx ends, calling fn for every
// device that appears or disappears (a container coming or going, a device
// changing its role). It reports the devices found at the start as Added.
// fn runs on Watch's goroutine; Watch returns when ctx is done.
func Watch(ctx context.Context, hostNS string, fn func(Event)) error {
	if err := netns.Check(hostNS); err != nil {
		return err
	}
	stamp, err := netns.StampOf(hostNS)
	if err != nil {
		return err
	}
	w := &watcher{ctx: ctx, hostNS: hostNS, stamp: stamp, fn: fn, kick: make(chan struct{}, 1),
		subs: map[string]context.CancelFunc{}, known: map[string]Device{}}
	defer func() {
		for _, cancel := range w.subs {
			cancel()
		}
	}()
	if !w.look() {
		return nil
	}
	last := time.Now()
	tick := time.NewTicker(nameCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if time.Since(last) < rescan {
				if !w.stillNamed() {
					return nil
				}
				continue
			}
		case <-w.kick:
			// Let the burst settle, then drop the kicks it left behind.
			wait := max(settle, minGap-time.Since(last))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			select {
			case <-w.kick:
			default:
			}
		}
		if !w.look() {
			return nil
		}
		last = time.Now()
	}
}

// watcher is one Watch: the netlink subscriptions it holds, and the
// devices it has reported.
type watcher struct {
	ctx    context.Context
	hostNS string
	stamp  netns.Stamp // what hostNS named when Watch started
	fn     func(Event)
	kick   chan struct{}
	subs   map[string]context.CancelFunc // by namespace
	known  map[string]Device             // by Device.Key
}

// follow keeps netlink watches on the namespaces that hold overlay
// devices: the host, and Docker's sandboxes.
func (w *watcher) follow(o *Overlay) {
	want := map[string]bool{w.hostNS: true}
	if o != nil {
		for _, d := range o.Devices {
			if d.Role != RoleContainer {
				want[d.Netns] = true
			}
		}
	}
	for ns, cancel := range w.subs {
		if !want[ns] {
			cancel()
			delete(w.subs, ns)
		}
	}
	for ns := range want {
		if _, ok := w.subs[ns]; !ok {
			sctx, cancel := context.WithCancel(w.ctx)
			w.subs[ns] = cancel
			go subscribe(sctx, ns, w.kick)
		}
	}
}

// look discovers the overlay again and reports what went and what came;
// false, after reporting Gone, once hostNS names another namespace or none.
// The name is checked after discovery, so that what it found is reported
// only if it was the watched namespace's.
func (w *watcher) look() bool {
	o, err := Discover(w.hostNS)
	if !w.stillNamed() {
		return false
	}
	if err != nil {
		w.fn(Event{Type: Failed, Err: err})
		w.follow(nil)
		o = &Overlay{Netns: w.hostNS}
	} else {
		w.follow(o)
	}
	now := map[string]Device{}
	for _, d := range o.Devices {
		now[d.Key()] = d
	}
	for k, d := range w.known {
		if n, ok := now[k]; !ok || n.Name != d.Name || n.Role != d.Role {
			w.fn(Event{Type: Removed, Device: d, Overlay: o})
			delete(w.known, k)
		}
	}
	for _, d := range o.Devices { // in discovery order: NICs before what hangs off them
		if _, ok := w.known[d.Key()]; !ok {
			w.known[d.Key()] = d
			w.fn(Event{Type: Added, Device: d, Overlay: o})
		}
	}
	return true
}

// stillNamed says whether hostNS still names the namespace Watch started
// in; once it does not, it reports Gone, the last event.
func (w *watcher) stillNamed() bool {
	if gone := w.moved(); gone != nil {
		w.fn(Event{Type: Gone, Err: gone})
		return false
	}
	return true
}

// moved says how hostNS stopped naming the namespace Watch started in; nil
// while it names it, and where that cannot be told (discovery reports
// such failures itself).
func (w *watcher) moved() error {
	if w.hostNS == "" {
		return nil // the calling thread's own: always the same
	}
	now, err := netns.StampOf(w.hostNS)
	switch {
	case netns.Gone(err):
		return err // "not found", or what is there now
	case err == nil && !now.Same(w.stamp):
		return fmt.Errorf("%s now names another network namespace than the one watched", netns.Label(w.hostNS))
	}
	return nil
}

// subscribe kicks on every link and route change in namespace ns until ctx
// ends, resubscribing when the kernel drops the socket (ENOBUFS on a busy
// host).
func subscribe(ctx context.Context, ns string, kick chan<- struct{}) {
	for ctx.Err() == nil {
		f, err := netns.Open(ns)
		if err != nil {
			return // the namespace is gone; Watch stops following it
		}
		h := vns.NsHandle(f.Fd())
		done := make(chan struct{})
		links := make(chan netlink.LinkUpdate, 64)
		routes := make(chan netlink.RouteUpdate, 64)
		lerr := netlink.LinkSubscribeWithOptions(links, done, netlink.LinkSubscribeOptions{Namespace: &h})
		rerr := netlink.RouteSubscribeWithOptions(routes, done, netlink.RouteSubscribeOptions{Namespace: &h})
		f.Close()
		// The subscriptions close their channels once done closes their
		// socket, but may first block on a full channel: drain them.
		stop := func() {
			close(done)
			if lerr == nil {
				go func() {
					for range links {
					}
				}()
			}
			if rerr == nil {
				go func() {
					for range routes {
					}
				}()
			}
		}
		if lerr != nil || rerr != nil {
			stop()
			select {
			case <-ctx.Done():
			case <-time.After(nameCheck):
			}
			continue
		}
		signal := func() {
			select {
			case kick <- struct{}{}:
			default:
			}
		}
		signal() // anything may have changed while not subscribed
	loop:
		for {
			select {
			case <-ctx.Done():
				stop()
				return
			case _, ok := <-links:
				if !ok {
					break loop
				}
				signal()
			case _, ok := <-routes:
				if !ok {
					break loop
				}
				signal()
			}
		}
		stop()
	}
}
