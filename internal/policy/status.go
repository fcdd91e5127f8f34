package policy

import (
	"sync/atomic"
	"time"
)

// Engagement is the policy's part of the agent's state file, so that
// status can say why falcon is on or off the path: the engagement test's
// verdicts, the last one's figures, and the decisions by cause.
type Engagement struct {
	Tests       uint64    `json:"tests"`
	ForSteering uint64    `json:"for_steering"`
	Last        time.Time `json:"last"`
	// What the containers received in the last test's windows, with
	// falcon steering and off the path (UDP datagrams plus TCP bytes in
	// 1448-byte segments).
	Steering uint64 `json:"delivered_steering"`
	Off      uint64 `json:"delivered_off_the_path"`
	Steer    bool   `json:"steer"`
	// Again: after a verdict against steering, when the same busy spell
	// is tested again (retest).
	Again time.Time `json:"test_again,omitzero"`
	// Cause: the latest turn decided by cause (cause.go), its inputs and
	// verdict; Decisions: the latest that acted or confirmed.
	Cause     *Record  `json:"cause,omitempty"`
	Decisions []Record `json:"decisions,omitempty"`
	// Never: why falcon never comes on the path (a CPU set too small ever
	// to hold a CPU free of the bottleneck, the NIC and the application).
	Never string `json:"never_on_path,omitempty"`
}

// Counters are the engagement's so far: Probes, the tests begun (an A/B
// test switches the path twice; an engagement by cause once); Thin, A/B
// tests that ended without a verdict for too little traffic; Tested and
// Won, the verdicts, and those for steering.
type Counters struct {
	Probes, Thin, Tested, Won atomic.Uint64
}
