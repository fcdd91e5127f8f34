package workload

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// NginxOpts describes one nginx web server serving a single static file.
type NginxOpts struct {
	Netns, Addr string
	Port        int
	CPUs        []int
	Workers     int // worker processes; 0 = nginx's "auto"
	Size        int // bytes of the file it serves, at NginxPath(Size)
}

// MaxPageSize bounds the served file: large enough for FALCON's biggest
// objects, small enough that a temp dir holds it without thought.
const MaxPageSize = 64 << 20

// NginxPath is the URL path of the file of size bytes an nginx serves.
func NginxPath(size int) string { return fmt.Sprintf("/index-%d.bin", size) }

func (o NginxOpts) validate() error {
	if _, err := netip.ParseAddr(o.Addr); err != nil {
		return fmt.Errorf("nginx: listen address %q: %v", o.Addr, err)
	}
	if err := checkPort("nginx port", o.Port, false); err != nil {
		return err
	}
	if o.Workers < 0 || o.Workers > 256 {
		return fmt.Errorf("nginx: %d worker processes, want 1..256 (0: auto)", o.Workers)
	}
	if o.Size < 1 || o.Size > MaxPageSize {
		return fmt.Errorf("nginx: file size %d out of range 1..%d", o.Size, MaxPageSize)
	}
	return nil
}

// NginxServer is the Server StartNginx returns: Stop also removes its
// directory.
type NginxServer struct {
	*server
	dir string
}

func (s *NginxServer) Stop() error {
	err := s.server.Stop()
	if rerr := os.RemoveAll(s.dir); err == nil {
		err = rerr
	}
	return err
}

// StartNginx starts nginx in the foreground (its master and workers in one
// process group, pinned to o.CPUs) and returns once it listens. Its
// configuration, document root, pid file and temp paths are in a temp
// directory, and its errors go to its stderr: it writes nothing under /etc
// or /var, so that a machine with only the bundle's copy runs it too.
func StartNginx(ctx context.Context, o NginxOpts) (Server, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := checkCommon("nginx", o.Netns, o.CPUs); err != nil {
		return nil, err
	}
	v, err := exec.Command(toolArg("nginx"), "-V").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("nginx -V: %v: %s", err, lastLines(string(v), 3))
	}
	dir, err := os.MkdirTemp("", "falcon-nginx-")
	if err != nil {
		return nil, err
	}
	if err := writeNginxDir(dir, o, nginxTempPaths(v)); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	argv := command(o.Netns, o.CPUs, "nginx", "-p", dir+"/", "-c", filepath.Join(dir, "nginx.conf"), "-e", "stderr")
	s, err := startServer(ctx, "nginx", o.Netns, "tcp", o.Port, argv)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &NginxServer{s, dir}, nil
}

func writeNginxDir(dir string, o NginxOpts, temps []string) error {
	www := filepath.Join(dir, "www")
	if err := os.Mkdir(www, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(www, NginxPath(o.Size)), bytes.Repeat([]byte{'x'}, o.Size), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(nginxConf(dir, o, temps)), 0o644)
}

// nginxConf is a server of one static file with no access log. Workers
// run as root, the only user every machine has; the connection limits stay
// above what wrk opens (MaxWrkConnections), and within the hard limit of
// descriptors that machines set (this one: 20000).
func nginxConf(dir string, o NginxOpts, temps []string) string {
	workers := "auto"
	if o.Workers > 0 {
		workers = strconv.Itoa(o.Workers)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "daemon off;\nmaster_process on;\nuser root;\nworker_processes %s;\nworker_rlimit_nofile 4096;\n", workers)
	fmt.Fprintf(&b, "pid %s;\nerror_log stderr warn;\n", filepath.Join(dir, "nginx.pid"))
	b.WriteString("events {\n\tworker_connections 4096;\n}\nhttp {\n\taccess_log off;\n\tsendfile on;\n\ttcp_nopush on;\n")
	b.WriteString("\tkeepalive_requests 1000000;\n\tdefault_type application/octet-stream;\n")
	for _, t := range temps {
		fmt.Fprintf(&b, "\t%s %s;\n", t, filepath.Join(dir, strings.TrimSuffix(t, "_path")))
	}
	fmt.Fprintf(&b, "\tserver {\n\t\tlisten %s;\n\t\troot %s;\n\t}\n}\n",
		netip.AddrPortFrom(netip.MustParseAddr(o.Addr), uint16(o.Port)), filepath.Join(dir, "www"))
	return b.String()
}

var tempPathRE = regexp.MustCompile(`--http-(client-body|proxy|fastcgi|uwsgi|scgi)-temp-path=`)

// nginxTempPaths names the temp path directives to set, from nginx -V: a
// build configured with absolute temp paths (Debian's, under
// /var/lib/nginx) creates them at start, and fails where they cannot be
// made. Modules built out have no directive to set.
func nginxTempPaths(v []byte) []string {
	var out []string
	for _, m := range tempPathRE.FindAllSubmatch(v, -1) {
		mod := strings.ReplaceAll(string(m[1]), "-", "_")
		if mod != "client_body" && bytes.Contains(v, []byte("--without-http_"+mod+"_module")) {
			continue
		}
		out = append(out, mod+"_temp_path")
	}
	return out
}
