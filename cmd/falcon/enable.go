package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/netns"
)

func init() {
	register(command{name: "enable", summary: "accelerate a host's overlay (falcon: starts a background agent; rps, rfs: sets values, nothing runs)", run: runEnable})
}

const agentSynopsis = "[--netns HOSTNS] [--mode NAME[:KEY=VALUE,…]] [--cpus LIST] [--threshold PCT] [--interval DUR] " +
	"[--policy adaptive|paper] [--guard-timeout DUR] [--order guarded|per-packet] [--devices auto|LIST] [--container-level] [--rps-cpus LIST] [--flow-entries N] " +
	"[--split] [--split-cpus LIST] [--split-proto tcp|udp|all]"

// agentOptions turns enable's and agent's flags into options; a setting
// that cannot be right is a usage error.
func agentOptions(f *agent.Flags) (agent.Options, error) {
	o, err := f.Options()
	var se *agent.SettingError
	if errors.As(err, &se) {
		return o, usagef("%s", se.Msg)
	}
	return o, err
}

func runEnable(args []string) error {
	fs := newFlagSet("enable", agentSynopsis)
	f := agent.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
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
	if agent.IsStatic(o.Mode) {
		return applyStatic(o)
	}
	st, err := agent.Running(o)
	if err != nil {
		return err
	}
	if st != nil {
		if st.Pid > 0 && agent.SameSettings(st.Options, o) {
			fmt.Printf("falcon is already enabled in network namespace %s with these settings (agent pid %d)\n", netns.Label(o.Netns), st.Pid)
			return nil
		}
		fmt.Printf("falcon is enabled in network namespace %s with other settings: replacing agent pid %d\n", netns.Label(o.Netns), st.Pid)
		if _, err := agent.Disable(o); err != nil {
			return fmt.Errorf("stop the running agent: %w", err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	pid, logPath, err := agent.Spawn(o, exe, "agent")
	if err != nil {
		return err
	}
	fmt.Printf("falcon enabled in network namespace %s (mode %s, CPUs %s, threshold %d%%): agent pid %d, log %s\n",
		netns.Label(o.Netns), o.Mode, cpuset.Format(o.CPUs), o.Threshold, pid, logPath)
	return nil
}
