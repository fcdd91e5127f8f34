package bench

// Interleaving. On a shared machine the rate a mode gets drifts over
// minutes (on the 2-vCPU VM vanilla's own rate moved 7–14 % between two
// invocations), and a bench that runs all of one mode's runs and then all
// of the next measures that drift as a difference between the modes.
// With --interleave every mode of a layout shares one testbed and the
// runs go in rounds: each round sets each mode up, runs every case once
// and undoes it, the modes' order rotating from round to round so that
// none always runs first after the testbed was idle. Run k of every mode
// is then measured within one round of run k of the baseline, and ratios
// pair them (Normalize).

// groupPlans is what shares a testbed: each plan alone, or with interleave
// the plans of one layout and container count, in the plan's order.
func groupPlans(plan []TestbedPlan, interleave bool) [][]TestbedPlan {
	var out [][]TestbedPlan
	idx := map[[2]any]int{}
	for _, tp := range plan {
		k := [2]any{tp.Layout, tp.Containers}
		if i, ok := idx[k]; ok && interleave {
			out[i] = append(out[i], tp)
			continue
		}
		idx[k] = len(out)
		out = append(out, []TestbedPlan{tp})
	}
	return out
}

// sessions orders a group's runs: grouped, one session per plan with every
// case's runs in turn; interleaved, one session per round and plan.
func sessions(plans []TestbedPlan, runs int, interleave bool) []session {
	var out []session
	if !interleave {
		for p, tp := range plans {
			s := session{plan: p}
			for c := range tp.Cases {
				for run := 1; run <= runs; run++ {
					s.items = append(s.items, item{c, run})
				}
			}
			out = append(out, s)
		}
		return out
	}
	for run := 1; run <= runs; run++ {
		for i := range plans {
			p := (i + run - 1) % len(plans)
			s := session{plan: p}
			for c := range plans[p].Cases {
				s.items = append(s.items, item{c, run})
			}
			out = append(out, s)
		}
	}
	return out
}
