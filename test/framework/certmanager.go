package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/test/stack"
)

// cert-manager on the local stack: its controller (CA and self-signed issuers, no webhook)
// runs once per stack in the namespace cert-manager, for every test that asks for it. Without
// the webhook nothing defaults or validates cert-manager objects: the helpers below write
// complete ones, and so must tests (and the operator) that write their own.

// CertManagerNamespace is where cert-manager runs, and where the CA Secrets of ClusterIssuers live.
const CertManagerNamespace = "cert-manager"

// The kinds of cert-manager.io/v1 the tests use.
var (
	CertificateGVK        = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}
	CertificateRequestGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "CertificateRequest"}
	IssuerGVK             = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Issuer"}
	ClusterIssuerGVK      = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "ClusterIssuer"}
)

var certManagerOnce struct {
	sync.Once
	err error
}

// InstallCertManager applies cert-manager's CRDs (from the module its controller is built
// from) and its controller, and waits until the controller is ready. It does so once per test
// binary; on a stack where cert-manager already runs it changes nothing and returns as soon as
// the Deployment is available. Server-side apply makes test binaries that install it at the
// same time agree.
func InstallCertManager(t *testing.T) {
	t.Helper()
	certManagerOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		certManagerOnce.err = installCertManager(ctx)
	})
	require.NoError(t, certManagerOnce.err, "installing cert-manager")
}

func installCertManager(ctx context.Context) error {
	crds := filepath.Join(Env.Root, "bin", "cert-manager-"+stack.CertManagerVersion, "crds")
	if err := Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", crds); err != nil {
		return fmt.Errorf("%w (make certmgr-bins builds bin/cert-manager-%s)", err, stack.CertManagerVersion)
	}
	var err error
	// kubectl wait fails outright on a CRD so new that it has no conditions yet: retry.
	for i := 0; i < 30; i++ {
		if err = Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=30s",
			"crd/certificates.cert-manager.io", "crd/certificaterequests.cert-manager.io",
			"crd/issuers.cert-manager.io", "crd/clusterissuers.cert-manager.io"); err == nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		return err
	}
	if err := Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f",
		filepath.Join(Env.Root, "test", "framework", "testdata", "cert-manager.yaml")); err != nil {
		return err
	}
	if err := Kubectl(ctx, "-n", CertManagerNamespace, "rollout", "status", "deployment/cert-manager", "--timeout=120s"); err != nil {
		return fmt.Errorf("%w\ncert-manager's log:\n%s", err, CertManagerLog(ctx, 40))
	}
	return nil
}

// CertManagerLog is the last lines of the cert-manager controller's log, for a failing test.
func CertManagerLog(ctx context.Context, lines int) string {
	pods := &corev1.PodList{}
	if err := Env.Client.List(ctx, pods, client.InNamespace(CertManagerNamespace), client.MatchingLabels{"app": "cert-manager"}); err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		log, err := Env.Stack.ContainerLog(ctx, p.Namespace, p.Name, "cert-manager-controller")
		if err != nil {
			log = err.Error()
		}
		all := strings.Split(strings.TrimRight(log, "\n"), "\n")
		out = append(out, "--- "+p.Name, strings.Join(all[max(0, len(all)-lines):], "\n"))
	}
	return strings.Join(out, "\n")
}

// CertManagerIssuer names a cert-manager issuer: what an issuerRef holds.
type CertManagerIssuer struct {
	Name string
	Kind string // Issuer or ClusterIssuer
	// CASecret is the Secret (in the Issuer's namespace, or in CertManagerNamespace for a
	// ClusterIssuer) holding the CA: tls.crt, tls.key and ca.crt.
	CASecret string
}

// Ref is the issuer as a Certificate's spec.issuerRef, complete.
func (i CertManagerIssuer) Ref() map[string]any {
	return map[string]any{"name": i.Name, "kind": i.Kind, "group": "cert-manager.io"}
}

// CertManagerCAIssuer installs cert-manager if needed and makes, in ns, a CA Issuer named
// name from a CA of its own: a selfSigned Issuer name-selfsigned signs the isCA Certificate
// name-ca (Secret name-ca, ECDSA P-256, 10 years), which the CA Issuer name signs with. It
// returns once the CA Issuer is Ready.
func CertManagerCAIssuer(t *testing.T, ns, name string) CertManagerIssuer {
	t.Helper()
	return caIssuer(t, ns, name, IssuerGVK)
}

// CertManagerCAClusterIssuer is CertManagerCAIssuer for a ClusterIssuer: its CA Secret is in
// CertManagerNamespace; the ClusterIssuers are deleted when the test ends.
func CertManagerCAClusterIssuer(t *testing.T, name string) CertManagerIssuer {
	t.Helper()
	return caIssuer(t, CertManagerNamespace, name, ClusterIssuerGVK)
}

func caIssuer(t *testing.T, ns, name string, kind schema.GroupVersionKind) CertManagerIssuer {
	t.Helper()
	InstallCertManager(t)
	issuerNS := ns
	if kind == ClusterIssuerGVK {
		// Cluster-wide objects outlive the test's namespace: remove what an earlier run left,
		// and remove them when the test ends.
		issuerNS = ""
		removeClusterCA(t, name)
		t.Cleanup(func() { removeClusterCA(t, name) })
	}
	selfSigned := CertManagerIssuer{Name: name + "-selfsigned", Kind: kind.Kind}
	createIssuer(t, issuerNS, selfSigned.Name, kind, map[string]any{"selfSigned": map[string]any{}})
	ca := CertManagerIssuer{Name: name, Kind: kind.Kind, CASecret: name + "-ca"}
	CreateCertificate(t, ns, name+"-ca", selfSigned, CertificateSpec{
		SecretName: ca.CASecret, CommonName: name + "-ca", IsCA: true, Duration: 10 * 365 * 24 * time.Hour,
		Usages: []string{"cert sign", "crl sign", "digital signature"},
	})
	WaitCertificate(t, ns, name+"-ca", 1, time.Minute)
	createIssuer(t, issuerNS, name, kind, map[string]any{"ca": map[string]any{"secretName": ca.CASecret}})
	waitIssuerReady(t, issuerNS, name, kind)
	return ca
}

func createIssuer(t *testing.T, ns, name string, kind schema.GroupVersionKind, spec map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	require.NoError(t, Env.Client.Create(context.Background(), u), "creating %s %s", kind.Kind, name)
}

// removeClusterCA deletes the ClusterIssuers of CertManagerCAClusterIssuer(name), its CA
// Certificate and the CA's Secret, waiting until they are gone.
func removeClusterCA(t *testing.T, name string) {
	t.Helper()
	var objs []client.Object
	for _, o := range []struct {
		gvk      schema.GroupVersionKind
		ns, name string
	}{
		{ClusterIssuerGVK, "", name}, {ClusterIssuerGVK, "", name + "-selfsigned"},
		{CertificateGVK, CertManagerNamespace, name + "-ca"},
	} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(o.gvk)
		u.SetNamespace(o.ns)
		u.SetName(o.name)
		objs = append(objs, u)
	}
	objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: CertManagerNamespace, Name: name + "-ca"}})
	for _, o := range objs {
		if err := Env.Client.Delete(context.Background(), o); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting %s: %v", o.GetName(), err)
		}
	}
	ok := pollUntil(time.Minute, func() bool {
		for _, o := range objs {
			if err := Env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("the cluster CA %s is not gone after a minute", name)
	}
}

func waitIssuerReady(t *testing.T, ns, name string, kind schema.GroupVersionKind) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	var last metav1.Condition
	ok := pollUntil(time.Minute, func() bool {
		if err := Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			last.Message = err.Error()
			return false
		}
		last = CertManagerCondition(u, "Ready")
		return last.Status == metav1.ConditionTrue
	})
	if !ok {
		t.Fatalf("%s %s/%s not Ready after a minute: %s %s\ncert-manager's log:\n%s", kind.Kind, ns, name, last.Reason, last.Message,
			CertManagerLog(context.Background(), 40))
	}
}

// CertificateSpec is what a test asks of a Certificate; CreateCertificate completes it with
// what cert-manager's webhook would default (an ECDSA P-256 key, rotated at each issuance).
type CertificateSpec struct {
	SecretName  string
	CommonName  string
	DNSNames    []string
	IPAddresses []string
	// Usages are cert-manager's names ("server auth", "client auth", "digital signature",
	// "key encipherment", "cert sign", ...); empty means "digital signature" and
	// "key encipherment".
	Usages []string
	IsCA   bool
	// Duration is the validity (90 days when zero); RenewBefore is how long before its end
	// the certificate is renewed (a third of Duration when zero).
	Duration    time.Duration
	RenewBefore time.Duration
}

// CertificateObject is the complete Certificate ns/name for spec from issuer.
func CertificateObject(ns, name string, issuer CertManagerIssuer, spec CertificateSpec) *unstructured.Unstructured {
	if spec.Duration == 0 {
		spec.Duration = 90 * 24 * time.Hour
	}
	if spec.RenewBefore == 0 {
		spec.RenewBefore = spec.Duration / 3
	}
	if len(spec.Usages) == 0 {
		spec.Usages = []string{"digital signature", "key encipherment"}
	}
	s := map[string]any{
		"secretName":  spec.SecretName,
		"issuerRef":   issuer.Ref(),
		"isCA":        spec.IsCA,
		"duration":    spec.Duration.String(),
		"renewBefore": spec.RenewBefore.String(),
		"usages":      strSlice(spec.Usages),
		"privateKey": map[string]any{
			"algorithm": "ECDSA", "size": int64(256), "encoding": "PKCS1", "rotationPolicy": "Always",
		},
	}
	if spec.CommonName != "" {
		s["commonName"] = spec.CommonName
	}
	if len(spec.DNSNames) > 0 {
		s["dnsNames"] = strSlice(spec.DNSNames)
	}
	if len(spec.IPAddresses) > 0 {
		s["ipAddresses"] = strSlice(spec.IPAddresses)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": s}}
	u.SetGroupVersionKind(CertificateGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func strSlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// CreateCertificate creates the Certificate ns/name for spec from issuer.
func CreateCertificate(t *testing.T, ns, name string, issuer CertManagerIssuer, spec CertificateSpec) {
	t.Helper()
	require.NoError(t, Env.Client.Create(context.Background(), CertificateObject(ns, name, issuer, spec)), "creating Certificate %s/%s", name, ns)
}

// WaitCertificate waits until the Certificate ns/name is Ready at status.revision minRevision
// or later (1 is its first issuance, each re-issue or renewal adds one), and returns it.
func WaitCertificate(t *testing.T, ns, name string, minRevision int64, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(CertificateGVK)
	var last string
	ok := pollUntil(timeout, func() bool {
		if err := Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			last = err.Error()
			return false
		}
		rev, _, _ := unstructured.NestedInt64(u.Object, "status", "revision")
		c := CertManagerCondition(u, "Ready")
		last = fmt.Sprintf("revision %d, Ready=%s %s %q", rev, c.Status, c.Reason, c.Message)
		return c.Status == metav1.ConditionTrue && rev >= minRevision &&
			c.ObservedGeneration >= u.GetGeneration()
	})
	if !ok {
		t.Fatalf("Certificate %s/%s not Ready at revision %d after %s: %s\ncert-manager's log:\n%s", ns, name, minRevision, timeout, last,
			CertManagerLog(context.Background(), 40))
	}
	return u
}

// CertManagerCondition is the condition typ of a cert-manager object (Unknown when absent).
func CertManagerCondition(u *unstructured.Unstructured, typ string) metav1.Condition {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != typ {
			continue
		}
		s, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		gen, _ := m["observedGeneration"].(int64)
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(s), Reason: reason, Message: msg, ObservedGeneration: gen}
	}
	return metav1.Condition{Type: typ, Status: metav1.ConditionUnknown, Reason: "NoCondition"}
}

// pollUntil calls cond every 200 ms until it holds (true) or timeout passes (false).
func pollUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}
