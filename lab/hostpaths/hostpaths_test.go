package hostpaths

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestLastReleaseRemoves: the race two rehearsals on new machines lost
// (/run/containerd left): one user made the directory, another's daemon
// held a socket in it when the first released; the second, which had not
// made it, released last. Nothing goes while a claim is live, the last
// release removes what any user made once it is empty, and never what
// existed before or holds a file.
func TestLastReleaseRemoves(t *testing.T) {
	tmp := t.TempDir()
	Root = filepath.Join(tmp, "hp")
	before := filepath.Join(tmp, "before")
	made, sock := filepath.Join(tmp, "run", "containerd"), filepath.Join(tmp, "run", "containerd", "s")
	if err := os.Mkdir(before, 0o755); err != nil {
		t.Fatal(err)
	}
	paths := []string{before, made, sock}
	if err := Claim("swarm", 0, paths); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sock, 0o755); err != nil { // the swarm's shims
		t.Fatal(err)
	}
	if err := Claim("image", os.Getpid(), paths); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(sock, "abc") // the image test's shim, still running
	if err := os.WriteFile(socket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if left, err := Release("swarm"); err != nil || left != nil || !exists(sock) {
		t.Fatalf("first release: left %v, %v; %s exists: %v", left, err, sock, exists(sock))
	}
	os.Remove(socket)
	if left, err := Release("image"); err != nil || left != nil {
		t.Fatalf("last release: left %v, %v", left, err)
	}
	for p, want := range map[string]bool{made: false, filepath.Dir(made): true, before: true, Root: false} {
		if exists(p) != want {
			t.Errorf("%s exists: %v, want %v", p, !want, want)
		}
	}
}

// TestDeadClaimAndFile: a claim whose process died holds nothing; a file
// in a made path keeps it, and the last release says so.
func TestDeadClaimAndFile(t *testing.T) {
	tmp := t.TempDir()
	Root = filepath.Join(tmp, "hp")
	made := filepath.Join(tmp, "plugins")
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if err := Claim("killed", dead.Process.Pid, []string{made}); err != nil {
		t.Fatal(err)
	}
	if err := Claim("live", 0, []string{made}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(made, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(made, "x.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	left, err := Release("live")
	if err != nil || !slices.Equal(left, []string{made}) {
		t.Errorf("release with a file left: %v, %v; want [%s]", left, err, made)
	}
	if exists(Root) {
		t.Errorf("%s left after the last release", Root)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
