package kubernetes

import (
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
)

// scrapeTarget is what a scraper needs of the agent's pod.
type scrapeTarget struct {
	Template struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Containers []struct {
				Ports []struct {
					Name          string `json:"name"`
					ContainerPort int    `json:"containerPort"`
					Protocol      string `json:"protocol"`
				} `json:"ports"`
			} `json:"containers"`
		} `json:"spec"`
	} `json:"template"`
}

type serviceSpec struct {
	ClusterIP string            `json:"clusterIP"`
	Selector  map[string]string `json:"selector"`
	Ports     []struct {
		Name       string `json:"name"`
		Port       int    `json:"port"`
		TargetPort any    `json:"targetPort"`
	} `json:"ports"`
}

// The agent serves metrics where the ConfigMap says, and every way of
// finding them agrees on that port: the pod's declared port, and the
// opt-in Service, NetworkPolicy and ServiceMonitor in prometheus/. No scrape
// annotations point at a port that only the node's loopback serves.
func TestMetricsAreScrapeable(t *testing.T) {
	objs := objects(t)
	host, port, err := net.SplitHostPort(objs["ConfigMap"].Data["metrics-addr"])
	if err != nil {
		t.Fatalf("ConfigMap metrics-addr %q: %v", objs["ConfigMap"].Data["metrics-addr"], err)
	}
	var ds scrapeTarget
	if err := json.Unmarshal(objs["DaemonSet"].Spec, &ds); err != nil {
		t.Fatal(err)
	}
	if ann := ds.Template.Metadata.Annotations; ann["prometheus.io/scrape"] == "true" && loopback(host) {
		t.Errorf("pod annotations %v ask to be scraped on a port the node's loopback alone serves", ann)
	}
	declared := false
	for _, p := range ds.Template.Spec.Containers[0].Ports {
		if p.Name == "metrics" && strconv.Itoa(p.ContainerPort) == port && p.Protocol == "TCP" {
			declared = true
		}
	}
	if !declared {
		t.Errorf("the agent's container declares no TCP port %s named metrics: %+v", port, ds.Template.Spec.Containers[0].Ports)
	}

	optIn := map[string]object{}
	for _, m := range jsonDocs(t, "prometheus/service.yaml", "prometheus/networkpolicy.yaml") {
		optIn[m.Doc.Kind] = m.Doc
	}
	svc, ok := optIn["Service"]
	if !ok {
		t.Fatal("no Service for the ServiceMonitor")
	}
	checkMetricsService(t, svc, ds.Template.Metadata.Labels, port)
	checkMetricsPolicy(t, optIn["NetworkPolicy"], ds.Template.Metadata.Labels, port)
	checkServiceMonitor(t, svc)
}

// checkMetricsService: the opt-in Service is headless, selects the agents'
// pods (labelled pods) and maps port to their metrics port.
func checkMetricsService(t *testing.T, svc object, pods map[string]string, port string) {
	t.Helper()
	var ss serviceSpec
	if err := json.Unmarshal(svc.Spec, &ss); err != nil {
		t.Fatal(err)
	}
	selectsWithin(t, "Service", ss.Selector, "the agent's pods lack", pods)
	if len(ss.Selector) == 0 || ss.ClusterIP != "None" || len(ss.Ports) != 1 || ss.Ports[0].Name != "metrics" ||
		strconv.Itoa(ss.Ports[0].Port) != port || ss.Ports[0].TargetPort != "metrics" {
		t.Errorf("Service %+v: want headless, selecting the agents, port %s named metrics to their metrics port", ss, port)
	}
}

// checkMetricsPolicy: the opt-in NetworkPolicy lets scrapes in to the
// agents' pods on port, and nothing else.
func checkMetricsPolicy(t *testing.T, policy object, pods map[string]string, port string) {
	t.Helper()
	var np struct {
		PodSelector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"podSelector"`
		Ingress []struct {
			Ports []struct {
				Port any `json:"port"`
			} `json:"ports"`
		} `json:"ingress"`
	}
	if err := json.Unmarshal(policy.Spec, &np); err != nil {
		t.Fatal(err)
	}
	selectsWithin(t, "NetworkPolicy", np.PodSelector.MatchLabels, "the agent's pods lack", pods)
	if len(np.PodSelector.MatchLabels) == 0 || len(np.Ingress) != 1 || len(np.Ingress[0].Ports) != 1 ||
		fmt.Sprint(np.Ingress[0].Ports[0].Port) != port {
		t.Errorf("NetworkPolicy %+v: want the agents' pods, one ingress rule to port %s", np, port)
	}
}

// checkServiceMonitor: the ServiceMonitor is a CRD the offline validator
// has no schema for: checked here against the Service instead.
func checkServiceMonitor(t *testing.T, svc object) {
	t.Helper()
	out, err := exec.Command(validator(t), "--json", "prometheus/servicemonitor.yaml").Output()
	if err != nil {
		t.Fatal(err)
	}

	var ms []struct {
		Doc struct {
			APIVersion, Kind string
			Metadata         struct{ Namespace string }
			Spec             struct {
				NamespaceSelector struct {
					MatchNames []string `json:"matchNames"`
				} `json:"namespaceSelector"`
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				Endpoints []struct{ Port, Path string } `json:"endpoints"`
			}
		} `json:"doc"`
	}
	if err := json.Unmarshal(out, &ms); err != nil || len(ms) != 1 {
		t.Fatalf("servicemonitor.yaml: %v, %d documents", err, len(ms))
	}
	sm := ms[0].Doc
	if sm.APIVersion != "monitoring.coreos.com/v1" || sm.Kind != "ServiceMonitor" || sm.Metadata.Namespace != namespace {
		t.Errorf("servicemonitor.yaml is %s %s in %q", sm.APIVersion, sm.Kind, sm.Metadata.Namespace)
	}
	selectsWithin(t, "ServiceMonitor", sm.Spec.Selector.MatchLabels, "the Service lacks", svc.Metadata.Labels)
	if len(sm.Spec.NamespaceSelector.MatchNames) != 1 || sm.Spec.NamespaceSelector.MatchNames[0] != namespace {
		t.Errorf("ServiceMonitor looks in %v, want %s", sm.Spec.NamespaceSelector.MatchNames, namespace)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v: want port metrics, path /metrics", sm.Spec.Endpoints)
	}
}

// selectsWithin: what selects on no label its targets lack (they have
// the labels have; lack says who they are).
func selectsWithin(t *testing.T, what string, sel map[string]string, lack string, have map[string]string) {
	t.Helper()
	for k, v := range sel {
		if have[k] != v {
			t.Errorf("%s selects %s=%s, which %s", what, k, v, lack)
		}
	}
}
