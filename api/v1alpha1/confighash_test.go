package v1alpha1

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Each field hashes on its own: a change shows in its own entry only, and in ConfigHash.
func TestConfigFieldsNameWhatChanged(t *testing.T) {
	a := EtcdClusterSpec{Version: "3.6.16"}
	b := a
	b.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	fa, fb := fields(a.ConfigFields()), fields(b.ConfigFields())
	require.Len(t, fa, 12)
	for f, h := range fa {
		if f == "resources" {
			require.NotEqual(t, h, fb[f])
		} else {
			require.Equal(t, h, fb[f], f)
		}
	}
	require.NotEqual(t, a.ConfigHash(), b.ConfigHash())
	require.Equal(t, "211fc85be2aa80b5", (&EtcdClusterSpec{}).ConfigHash(), "running Pods carry it: another form restarts them all")
	b.Version = "3.6.17"
	require.Equal(t, fields(b.ConfigFields()), fb, "the version is planned on its own")
}

func fields(s string) map[string]string {
	out := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		f, h, _ := strings.Cut(pair, "=")
		out[f] = h
	}
	return out
}

// A TLS section that leaves both sides plain, with its defaults filled in, hashes as no TLS
// section: running Pods keep their hash when the schema grows TLS fields.
func TestDisabledTLSHashesAsNone(t *testing.T) {
	none := EtcdClusterSpec{Version: "3.6.16"}
	disabled := none
	disabled.TLS = &TLSSpec{Mode: TLSDisabled, CertificateValidity: &metav1.Duration{Duration: 2160 * time.Hour},
		Client: &TLSSideSpec{Mode: TLSDisabled}}
	require.Equal(t, none.ConfigHash(), disabled.ConfigHash())

	on := none
	on.TLS = &TLSSpec{Mode: TLSDisabled, Client: &TLSSideSpec{Mode: TLSAuto}}
	require.NotEqual(t, none.ConfigHash(), on.ConfigHash())
	renewed := on
	renewed.TLS = &TLSSpec{Mode: TLSDisabled, Client: &TLSSideSpec{Mode: TLSAuto}, CertificateValidity: &metav1.Duration{Duration: time.Hour}}
	require.Equal(t, on.ConfigHash(), renewed.ConfigHash(), "certificates renew without a restart")
}

func TestSideModes(t *testing.T) {
	var none *TLSSpec
	require.Equal(t, TLSDisabled, none.ClientMode())
	both := &TLSSpec{Mode: TLSAuto}
	require.Equal(t, TLSAuto, both.ClientMode())
	require.Equal(t, TLSAuto, both.PeerMode())
	peerOnly := &TLSSpec{Mode: TLSDisabled, Peer: &TLSSideSpec{Mode: TLSCertManager}}
	require.Equal(t, TLSDisabled, peerOnly.ClientMode())
	require.Equal(t, TLSCertManager, peerOnly.PeerMode())
}
