package convert

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// backupMeta names one of our backup objects after theirs, in their namespace.
func backupMeta(t *theirs, kind string) (metav1.TypeMeta, metav1.ObjectMeta) {
	return metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: kind},
		metav1.ObjectMeta{Name: t.name, Namespace: t.namespace}
}

// newBackup is one snapshot of t's cluster to dest.
func newBackup(t *theirs, dest v1alpha1.BackupDestination) ([]any, error) {
	tm, om := backupMeta(t, "EtcdBackup")
	return []any{&v1alpha1.EtcdBackup{TypeMeta: tm, ObjectMeta: om, Spec: v1alpha1.EtcdBackupSpec{
		ClusterRef:  v1alpha1.ClusterReference{Name: t.of.out.Name},
		Destination: dest,
	}}}, checkDestination(dest)
}

// newSchedule takes snapshots of t's cluster to dest on the schedule, keeping keepLast of
// them (0: no count).
func newSchedule(t *theirs, schedule string, dest v1alpha1.BackupDestination, keepLast int64) ([]any, error) {
	if schedule == "" {
		return nil, errors.New("the backup schedule is required")
	}
	tm, om := backupMeta(t, "EtcdBackupSchedule")
	s := &v1alpha1.EtcdBackupSchedule{TypeMeta: tm, ObjectMeta: om, Spec: v1alpha1.EtcdBackupScheduleSpec{
		ClusterRef:  v1alpha1.ClusterReference{Name: t.of.out.Name},
		Schedule:    schedule,
		Destination: dest,
	}}
	if keepLast > 0 {
		n := int32(keepLast)
		s.Spec.Retention.KeepLast = &n
	}
	return []any{s}, checkDestination(dest)
}

// checkDestination refuses a destination the CRD refuses: a store with no bucket or claim.
func checkDestination(d v1alpha1.BackupDestination) error {
	const minBucket = 3
	switch {
	case d.S3 != nil && len(d.S3.Bucket) < minBucket, d.GCS != nil && len(d.GCS.Bucket) < minBucket:
		return errors.New("the backup store's bucket is required (at least 3 characters)")
	case d.PVC != nil && d.PVC.ClaimName == "":
		return errors.New("the backup volume claim's name is required")
	case d.S3 == nil && d.GCS == nil && d.PVC == nil:
		return errors.New("the backup store is required")
	}
	return nil
}

// restored is the note on a restore of theirs.
const restored = "the cluster was restored from this backup when it was made; the adopted cluster keeps its data, so there is nothing to restore"

// bucketPath reads "<bucket>/<path to the file>": the bucket, and the folder as prefix. Our
// backups name their objects themselves, so the file's own name is noted and left out.
func bucketPath(t *theirs, where, p string) (bucket, prefix string) {
	bucket, file, _ := strings.Cut(p, "/")
	dir, base := path.Split(file)
	if base != "" {
		t.notes = append(t.notes, fmt.Sprintf("%s: the object name %s: the operator names each backup's object itself (namespace/cluster/cluster-time-revision, under the prefix), so that none overwrites another", where, quote(base)))
	}
	if i := strings.Index(dir, "{{"); i >= 0 {
		t.notes = append(t.notes, fmt.Sprintf("%s: the template fields of %s: the operator names each backup's object by its namespace, cluster and time", where, quote(dir)))
		dir = dir[:i]
	}
	return bucket, strings.TrimSuffix(dir, "/")
}

// firstLabel is the first DNS label of a URL's host ("http://a.b.svc:2379" -> "a").
func firstLabel(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		u, err = url.Parse("//" + raw) // an endpoint without a scheme
		if err != nil {
			return ""
		}
	}
	label, _, _ := strings.Cut(u.Hostname(), ".")
	return label
}

// objectURL reads a URL of an object in a store, s3://bucket/path?endpoint=&region= or
// gs://bucket/path.
func objectURL(t *theirs, where, raw string) (v1alpha1.BackupDestination, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return v1alpha1.BackupDestination{}, fmt.Errorf("%s: %w", where, err)
	}
	bucket, prefix := bucketPath(t, where, u.Host+u.Path)
	q := u.Query()
	switch u.Scheme {
	case "s3":
		return v1alpha1.BackupDestination{S3: s3Query(t, where, bucket, prefix, q)}, nil
	case "gs":
		return v1alpha1.BackupDestination{GCS: &v1alpha1.GCSDestination{Bucket: bucket, Prefix: prefix}}, nil
	}
	return v1alpha1.BackupDestination{}, fmt.Errorf("%s %s: the store is s3:// or gs:// here", where, raw)
}

// s3Query reads the query parameters of an s3:// URL as the Go CDK reads them: endpoint,
// region, disableSSL and s3ForcePathStyle.
func s3Query(t *theirs, where, bucket, prefix string, q url.Values) *v1alpha1.S3Destination {
	s3 := &v1alpha1.S3Destination{Bucket: bucket, Prefix: prefix, Region: q.Get("region"), ForcePathStyle: q.Get("s3ForcePathStyle") == "true"}
	if e := q.Get("endpoint"); e != "" {
		scheme := "https://"
		if q.Get("disableSSL") == "true" {
			scheme = "http://"
		}
		if !strings.Contains(e, "://") {
			e = scheme + e
		}
		s3.Endpoint = e
	}
	for _, k := range []string{"endpoint", "region", "disableSSL", "s3ForcePathStyle"} {
		q.Del(k)
	}
	if len(q) > 0 {
		t.notes = append(t.notes, fmt.Sprintf("%s: the query %s: no equivalent; set it on the S3 destination by hand", where, q.Encode()))
	}
	return s3
}

// location reads a destination written as {s3: {endpoint, bucket, key, region,
// forcePathStyle, credentialsSecretRef}} or {pvc: {claimName, subPath}}, the shape aenix's
// and cozystack's operators share.
func location(t *theirs, f fields) v1alpha1.BackupDestination {
	if f.has("pvc") {
		p := f.obj("pvc")
		return v1alpha1.BackupDestination{PVC: &v1alpha1.PVCDestination{ClaimName: p.str("claimName"), SubPath: p.str("subPath")}}
	}
	if !f.has("s3") {
		return v1alpha1.BackupDestination{}
	}
	s := f.obj("s3")
	d := v1alpha1.BackupDestination{S3: &v1alpha1.S3Destination{
		Endpoint:          s.str("endpoint"),
		Bucket:            s.str("bucket"),
		Prefix:            s.str("key"),
		Region:            s.str("region"),
		ForcePathStyle:    s.flag("forcePathStyle"),
		CredentialsSecret: s.obj("credentialsSecretRef").str("name"),
	}}
	credentials(t, d, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	return d
}

// credentials asks for our keys in the Secret of theirs the destination names, when
// theirs are others.
func credentials(t *theirs, d v1alpha1.BackupDestination, theirKeys string) {
	if secret := d.CredentialsSecret(); secret != "" {
		t.todo = append(t.todo, fmt.Sprintf("Secret %s: our backups read the keys %s from it (theirs are %s): add them",
			secret, strings.Join(d.CredentialKeys(), " and "), theirKeys))
	}
}
