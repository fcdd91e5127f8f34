package measure

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconnet/falcon/lab/workload"
)

// A client whose UDP stream setup was lost is started again, at most
// setupAttempts times in all and only within the warm-up of its first
// start; any other failure ends it at once.
func TestRetrySetup(t *testing.T) {
	lost := errors.Join(workload.ErrUDPSetupLost, errors.New("iperf3: unable to read from stream socket"))
	other := errors.New("iperf3: unable to connect to server: Connection refused")
	for _, c := range []struct {
		name     string
		fails    []error       // what each attempt returns; nil: success
		delay    time.Duration // each attempt's length
		calls    int
		restarts int32
		err      error
	}{
		{"lost once", []error{lost, nil}, 0, 2, 1, nil},
		{"lost every time", []error{lost, lost, lost, lost}, 0, setupAttempts, setupAttempts - 1, workload.ErrUDPSetupLost},
		{"another failure", []error{other, nil}, 0, 1, 0, other},
		{"lost after the warm-up", []error{lost, nil}, 60 * time.Millisecond, 1, 0, workload.ErrUDPSetupLost},
	} {
		t.Run(c.name, func(t *testing.T) {
			var restarts atomic.Int32
			calls := 0
			_, err := retrySetup(context.Background(), 50*time.Millisecond, &restarts, func(context.Context) (any, error) {
				calls++
				time.Sleep(c.delay)
				return nil, c.fails[calls-1]
			})
			if calls != c.calls || restarts.Load() != c.restarts || !errors.Is(err, c.err) {
				t.Errorf("%d calls, %d restarts, err %v; want %d, %d, %v", calls, restarts.Load(), err, c.calls, c.restarts, c.err)
			}
		})
	}
}
