package main

import (
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/netns"
)

// applyStatic enables a mode that only sets values (rps, rfs): they are
// set here, journaled, and nothing is left running. An agent running in the
// namespace (of any mode) is stopped first.
func applyStatic(o agent.Options) error {
	st, err := agent.Running(o)
	if err != nil {
		return err
	}
	if st != nil {
		fmt.Printf("falcon runs in network namespace %s (mode %s, agent pid %d): replacing it\n", netns.Label(o.Netns), st.Options.Mode, st.Pid)
		if _, err := agent.Disable(o); err != nil {
			return fmt.Errorf("stop the running agent: %w", err)
		}
	}
	// The summary below says what was set; of the log only warnings (from
	// discovery) and the undoing of earlier settings are news.
	l := log.New(os.Stderr, "falcon enable: ", 0)
	o.Logf = func(format string, a ...any) {
		if msg := fmt.Sprintf(format, a...); strings.HasPrefix(msg, "warning") || strings.HasPrefix(msg, "restoring") {
			l.Print(msg)
		}
	}
	applied, err := agent.Apply(o)
	if err != nil {
		return err
	}
	fmt.Printf("falcon enabled in network namespace %s (mode %s): %s; no agent runs, 'falcon status' lists every value, 'falcon disable%s' restores them\n",
		netns.Label(o.Netns), o.Mode, agent.SummarizeValues(applied.Values), agent.NetnsFlag(o.Netns))
	return nil
}
