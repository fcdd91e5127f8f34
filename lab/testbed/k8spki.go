package testbed

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The k8s layout's certificates and kubeconfigs, made here with crypto/x509
// as kubeadm would make them: one CA signs the API server's serving
// certificate and every client's; each client's identity is its
// certificate's subject (CN the user, O the groups), which the API server's
// default RBAC bindings know.

// pki writes a CA and the certificates it signs into dir.
type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  crypto.Signer
	serial int64
}

// client is one identity a kubeconfig carries.
type client struct{ file, cn, org string }

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir, serial: 1}
	key, err := p.key("ca")
	if err != nil {
		return nil, err
	}
	tmpl := p.template("falcon-testbed-ca", "")
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	p.caKey = key
	return p, writePEM(p.path("ca.crt"), "CERTIFICATE", der)
}

func (p *pki) path(f string) string { return filepath.Join(p.dir, f) }

// key makes an ECDSA key and writes it as name.key (PKCS #8).
func (p *pki) key(name string) (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return key, writePEM(p.path(name+".key"), "PRIVATE KEY", der)
}

func (p *pki) template(cn, org string) *x509.Certificate {
	p.serial++
	subj := pkix.Name{CommonName: cn}
	if org != "" {
		subj.Organization = []string{org}
	}
	now := time.Now()
	return &x509.Certificate{SerialNumber: big.NewInt(p.serial), Subject: subj,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour)}
}

// cert writes name.crt and name.key: a client certificate for cn in group
// org, or with addresses a serving certificate for them too.
func (p *pki) cert(name, cn, org string, ips []string, dns []string) error {
	key, err := p.key(name)
	if err != nil {
		return err
	}
	tmpl := p.template(cn, org)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if len(ips)+len(dns) > 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		for _, ip := range ips {
			tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
		}
		tmpl.DNSNames = dns
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, key.Public(), p.caKey)
	if err != nil {
		return err
	}
	return writePEM(p.path(name+".crt"), "CERTIFICATE", der)
}

// serviceAccountKey writes the key pair that signs service account tokens.
func (p *pki) serviceAccountKey() error {
	key, err := p.key("sa")
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	return writePEM(p.path("sa.pub"), "PUBLIC KEY", der)
}

// kubeconfig writes name.kubeconfig: the API server at server, as client c.
func (p *pki) kubeconfig(c client, server string) error {
	if err := p.cert(c.file, c.cn, c.org, nil, nil); err != nil {
		return err
	}
	conf := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: falcon
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: falcon
  context: {cluster: falcon, user: %s}
current-context: falcon
`, server, p.path("ca.crt"), c.cn, p.path(c.file+".crt"), p.path(c.file+".key"), c.cn)
	return os.WriteFile(p.path(c.file+".kubeconfig"), []byte(conf), 0o600)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
