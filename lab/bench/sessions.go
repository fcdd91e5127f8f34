package bench

import "slices"

// Interleaving. On a shared machine the rate a mode gets drifts over
// minutes (on the 2-vCPU VM vanilla's own rate moved 7–14 % between two
// invocations), and a bench that runs all of one mode's runs and then all
// of the next measures that drift as a difference between the modes.
// With --interleave every mode of a layout shares one testbed and the
// runs go in rounds: each round sets each mode up, runs every case once
// and undoes it. Run k of every mode is then measured within one round of
// run k of the baseline, and ratios pair them (Normalize). The modes'
// order changes from round to round (balanced), so that none always runs
// first after the testbed was idle and none always runs after the same
// other mode: a mode's undo that slows the next run (an agent exiting,
// programs freed) would otherwise read as a difference between the two.

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
	orders := balanced(len(plans))
	for run := 1; run <= runs; run++ {
		for _, p := range orders[(run-1)%len(orders)] {
			s := session{plan: p}
			for c := range plans[p].Cases {
				s.items = append(s.items, item{c, run})
			}
			out = append(out, s)
		}
	}
	return out
}

// balanced is a Williams design: orders of 0..n-1 in which each mode runs
// in each place equally often and right after each other mode equally
// often (first-order carry-over balanced). Row i adds i to the sequence
// 0, 1, n-1, 2, n-2, ...; for odd n the rows reversed are needed as well.
func balanced(n int) [][]int {
	seq := make([]int, n)
	for j := 1; j < n; j++ {
		if j%2 == 1 {
			seq[j] = (j + 1) / 2
		} else {
			seq[j] = n - j/2
		}
	}
	var rows [][]int
	for i := range n {
		row := make([]int, n)
		for j, w := range seq {
			row[j] = (i + w) % n
		}
		rows = append(rows, row)
	}
	if n%2 == 1 {
		for i := range n {
			rev := slices.Clone(rows[i])
			slices.Reverse(rev)
			rows = append(rows, rev)
		}
	}
	return rows
}
