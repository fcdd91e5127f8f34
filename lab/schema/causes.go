package schema

import "time"

// The decisions by cause a results file records are the file's own types:
// a change to the agent's (agent.CauseRecord, internal/cause's Window,
// Step, Params) must not change the format of files already written. Their
// JSON names are the ones those types had when bench began recording them;
// lab/modes converts the agent's into these where bench fills a run.

// CauseActivity is the decision by cause over a window: its turns by
// verdict, its engagements begun, paying and failing, and every turn
// with the policy's settings (File.CauseTraces replays them).
type CauseActivity struct {
	Params     CauseParams   `json:"params"`
	Engage     uint64        `json:"engage"`
	Inline     uint64        `json:"inline"`
	Unreadable uint64        `json:"unreadable"`
	Begun      uint64        `json:"begun"`
	Pays       uint64        `json:"pays"`
	Fails      uint64        `json:"fails"`
	Trace      []CauseRecord `json:"trace,omitempty"`
}

// CauseParams are the policy's settings: the busy percent at which a CPU
// is saturated, the CPUs a stage may move to.
type CauseParams struct {
	Threshold float64 `json:"threshold"`
	Set       []int   `json:"set"`
}

// CauseRecord is one turn of the policy: its window and its step.
type CauseRecord struct {
	Seq    uint64      `json:"seq"`
	At     time.Time   `json:"at"`
	Window CauseWindow `json:"window"`
	Step   CauseStep   `json:"step"`
}

// CauseWindow is what one reading of the causes saw since the one before.
type CauseWindow struct {
	Ms         float64    `json:"ms"`
	CPUs       []CauseCPU `json:"cpus"`
	AppCPUs    []int      `json:"app_cpus"`
	NICCPUs    []int      `json:"nic_cpus"`
	Listed     bool       `json:"listed,omitempty"`
	NewSockets bool       `json:"new_sockets,omitempty"`
	Delivered  uint64     `json:"delivered"`
	SockDrops  uint64     `json:"sock_drops"`
	Engaged    bool       `json:"engaged"`
	Unreadable string     `json:"unreadable,omitempty"`
}

// CauseCPU is one CPU over a window: busy and softirq time in percent,
// busy ticks, NET_RX softirqs, backlog drops and budget squeezes.
type CauseCPU struct {
	ID        int     `json:"cpu"`
	Busy      float64 `json:"busy_pct"`
	Softirq   float64 `json:"softirq_pct"`
	BusyTicks uint64  `json:"busy_ticks"`
	NetRx     uint64  `json:"net_rx"`
	Dropped   uint64  `json:"dropped"`
	Squeezed  uint64  `json:"squeezed"`
}

// CauseStep is what the policy did with a window: its phase after it,
// the verdict, a confirmation's judgement, the action taken.
type CauseStep struct {
	Phase    string             `json:"phase"`
	Verdict  CauseVerdict       `json:"verdict"`
	Confirm  *CauseConfirmation `json:"confirm,omitempty"`
	Action   string             `json:"action,omitempty"`
	Fallback bool               `json:"fallback,omitempty"`
}

// CauseVerdict is the ruling on one window and its reasons.
type CauseVerdict struct {
	Bottleneck int    `json:"bottleneck"`
	Saturated  bool   `json:"saturated"`
	Dropping   bool   `json:"dropping"`
	Targets    []int  `json:"targets"`
	AppKnown   bool   `json:"app_known"`
	Engage     bool   `json:"engage"`
	Readable   bool   `json:"readable"`
	Why        string `json:"why"`
}

// CauseConfirmation is the judgement of an engagement: paid or not, by the
// bottleneck's cost per packet and the rate delivered, before and while
// engaged.
type CauseConfirmation struct {
	Outcome  string  `json:"outcome"`
	BaseCost float64 `json:"base_cost"`
	Cost     float64 `json:"cost"`
	BaseRate float64 `json:"base_rate"`
	Rate     float64 `json:"rate"`
	Wins     int     `json:"wins"`
	Losses   int     `json:"losses"`
	Ms       float64 `json:"ms"`
	Why      string  `json:"why"`
}
