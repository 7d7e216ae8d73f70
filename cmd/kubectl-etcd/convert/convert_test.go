package convert

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// Every field not read is noted with its path, inner objects included; fields read are not.
func TestRestNotesWhatWasNotRead(t *testing.T) {
	var notes []string
	f := newFields(map[string]any{
		"size": int64(3),
		"pod":  map[string]any{"labels": map[string]any{"a": "b"}, "frobnicate": true},
		"gone": map[string]any{},
		"list": []any{"x"},
	}, "spec", &notes)
	f.num("size")
	f.obj("pod").take("labels")
	f.drop("absent", "never noted")
	f.rest()
	require.Equal(t, []string{
		"spec.list: not a field this converter knows; carry it over by hand if it matters",
		"spec.pod.frobnicate: not a field this converter knows; carry it over by hand if it matters",
	}, notes)
}

func TestEtcdVersion(t *testing.T) {
	for _, tt := range []struct{ in, flag, want, err string }{
		{in: "3.5.17", want: "3.5.17"},
		{in: "v3.6.1", want: "3.6.1"},
		{in: "", flag: "3.5.21", want: "3.5.21"},
		{in: "3.5.17", flag: "3.6.0", want: "3.5.17"}, // the manifest says it
		{in: "", err: "pass it with --etcd-version"},
		{in: "3.4.30", err: "etcdplan adopts clusters on etcd 3.5 or newer"},
		{in: "latest", err: `etcd version "latest" is not a 3.x.y release`},
	} {
		got, err := etcdVersion(tt.in, Options{EtcdVersion: tt.flag})
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, tt.in)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tt.want, got)
	}
}

func TestSplitImage(t *testing.T) {
	for image, want := range map[string][2]string{
		"registry.local/coreos/etcd:v3.5.12": {"registry.local/coreos/etcd", "3.5.12"},
		"registry:5000/etcd":                 {"registry:5000/etcd", ""},
		"registry.local/etcd:3.5.21-0":       {"registry.local/etcd", "3.5.21"},
		"localhost:5000/mirror/etcd:v3.6.4":  {"localhost:5000/mirror/etcd", "3.6.4"},
	} {
		repo, version := splitImage(image)
		require.Equal(t, want, [2]string{repo, version}, image)
	}
}

func TestObjectURL(t *testing.T) {
	th := &theirs{}
	d, err := objectURL(th, "url", "s3://b1/dir/sub/file.db?endpoint=minio:9000&disableSSL=true&s3ForcePathStyle=true&region=r&awssdk=v2")
	require.NoError(t, err)
	require.Equal(t, &v1alpha1.S3Destination{Bucket: "b1", Prefix: "dir/sub", Endpoint: "http://minio:9000", Region: "r", ForcePathStyle: true}, d.S3)
	require.Len(t, th.notes, 2, "the file name and the query left: %v", th.notes)
	d, err = objectURL(th, "url", "gs://b2/{{ .Namespace }}/x/{{ .UID }}.db")
	require.NoError(t, err)
	require.Equal(t, &v1alpha1.GCSDestination{Bucket: "b2"}, d.GCS)
	_, err = objectURL(th, "url", "azblob://c/x.db")
	require.ErrorContains(t, err, "the store is s3:// or gs:// here")
}

func TestFirstLabel(t *testing.T) {
	for in, want := range map[string]string{
		"http://my-cluster:2379":                  "my-cluster",
		"https://example-client.default.svc:2379": "example-client",
		"example-client.default.svc:2379":         "example-client",
	} {
		require.Equal(t, want, firstLabel(in), in)
	}
}
