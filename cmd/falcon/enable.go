package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/netns"
)

func init() {
	app.Register(cli.Command{Name: "enable", Summary: "accelerate a host's overlay (falcon: starts a background agent; rps, rfs: sets values, nothing runs)", Run: runEnable})
}

// agentSynopsis is enable's and agent's usage line, from the settings table.
var agentSynopsis = agent.Synopsis()

// agentOptions turns enable's and agent's flags into options; a setting
// that cannot be right is a usage error.
func agentOptions(f *agent.Flags) (agent.Options, error) {
	o, err := f.Options()
	var se *agent.SettingError
	if errors.As(err, &se) {
		return o, cli.Usagef("%s", se.Msg)
	}
	return o, err
}

func runEnable(args []string) error {
	fs := app.FlagSet("enable", agentSynopsis)
	f := agent.AddFlags(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	o, err := agentOptions(f)
	if err != nil {
		return err
	}
	// Checks that need no change to the system come first, here, so that
	// bad input never starts (or replaces) an agent.
	if err := agent.Check(&o); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if agent.IsStatic(o.Mode) {
		o.Log = staticLog()
	}
	e, err := agent.Enable(o, exe, "agent")
	ns := netns.Label(o.Netns)
	switch r := e.Replaced; {
	case e.Already:
		fmt.Printf("falcon is already enabled in network namespace %s with these settings (agent pid %d)\n", ns, e.Pid)
		return nil
	case r != nil && agent.IsStatic(o.Mode):
		fmt.Printf("falcon runs in network namespace %s (mode %s, agent pid %d): replacing it\n", ns, r.Options.Mode, r.Pid)
	case r != nil:
		fmt.Printf("falcon is enabled in network namespace %s with other settings: replacing agent pid %d\n", ns, r.Pid)
	}
	if err != nil {
		return err
	}
	if e.Applied != nil {
		fmt.Printf("falcon enabled in network namespace %s (mode %s): %s; no agent runs, 'falcon status' lists every value, 'falcon disable%s' restores them\n",
			ns, o.Mode, agent.SummarizeValues(e.Applied.Values), agent.NetnsFlag(o.Netns))
		return nil
	}
	fmt.Printf("falcon enabled in network namespace %s (mode %s, CPUs %s, threshold %d%%): agent pid %d, log %s\n",
		ns, agent.ModeName(o), cpuset.Format(o.CPUs), o.Threshold, e.Pid, e.Log)
	return nil
}

// staticLog: a static mode's summary says what was set; of its log only
// warnings (from discovery) and the undoing of earlier settings are news.
func staticLog() *slog.Logger {
	return cliLogger(os.Stderr, "falcon enable: ", func(r slog.Record) bool {
		return r.Level >= slog.LevelWarn || strings.HasPrefix(r.Message, "restoring")
	})
}
