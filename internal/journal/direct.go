package journal

// Read returns the value at path (one falcon changes: checkPath) in namespace
// netns ("" = the current one).
func Read(netns, path string) (string, error) {
	if err := checkPath(path); err != nil {
		return "", err
	}
	var v string
	err := inNetns(netns, needsSysfs([]Change{{Path: path}}), func(nsID) error {
		var err error
		v, err = readValue(path)
		return err
	})
	return v, err
}

// Write writes value at path in namespace netns as Apply does — also where
// /sys or /proc/sys is mounted read-only — but records nothing: for values
// whose old value is kept elsewhere, such as kernel-wide ones that several
// agents share.
func Write(netns, path, value string) error {
	if err := checkPath(path); err != nil {
		return err
	}
	return inNetns(netns, needsSysfs([]Change{{Path: path}}), func(nsID) error { return writeValue(path, value) })
}
