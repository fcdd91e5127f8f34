package schema

// Machine describes where results were measured.
type Machine struct {
	CPUModel    string            `json:"cpu_model"`
	Cores       int               `json:"cores"` // online CPUs
	OnlineCPUs  string            `json:"online_cpus"`
	Kernel      string            `json:"kernel"`
	KernelBuild string            `json:"kernel_build,omitempty"`
	Arch        string            `json:"arch"`
	Hostname    string            `json:"hostname"`
	MemoryBytes uint64            `json:"memory"`
	OS          string            `json:"os,omitempty"`
	Virt        string            `json:"virtualization,omitempty"`
	GoVersion   string            `json:"go_version"`
	Tools       map[string]string `json:"tools,omitempty"` // tool → its version line
	// ToolsDir is the benchmark bundle's tool directory (FALCON_TOOLS_DIR)
	// when the tools it carries were used instead of the host's.
	ToolsDir string `json:"tools_dir,omitempty"`
}
