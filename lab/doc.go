// Package lab is where falcon is measured, apart from the product it
// measures: testbeds (testbed), the tools' traffic and bench's catalogue of
// workloads (workload, xdpsend, seqcheck), the stage tracer (stagetrace),
// the benchmark: its orchestration (bench), the modes it runs (modes), one
// run of one case (measure) and the counters a run reads (probes); its
// machine probe (benchprobe), the results file and the lab's modes
// (schema), the drawing of a results file (render) and the report page
// (report), the papers' figures (papers), statistics (stats), the model
// (sim), which tools run (toolpath), and what the root tests share
// (labtest). Its commands are falcon-lab's (cmd/falcon-lab). The lab
// imports the product; neither the falcon binary (cmd/falcon) nor any
// package of internal/ imports the lab (boundary_test.go holds them to
// that), so what a node runs carries nothing of it. Tests of the product
// may use the lab: they run the product on its testbeds.
package lab
