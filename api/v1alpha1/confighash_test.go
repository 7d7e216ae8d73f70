package v1alpha1

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
