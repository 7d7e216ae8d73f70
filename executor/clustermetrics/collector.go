// Package clustermetrics exports the state of EtcdClusters and their backups as Prometheus
// gauges, read from the manager's cache at each scrape: what alerts watch (members and
// quorum, conditions, alarms, the age of the newest backup). Since nothing is kept between
// scrapes, a deleted cluster's series end with it.
package clustermetrics

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

var (
	keys     = []string{"namespace", "cluster"}
	replicas = prometheus.NewDesc("etcdplan_cluster_replicas",
		"Voting members the spec asks for (spec.replicas).", keys, nil)
	voters = prometheus.NewDesc("etcdplan_cluster_voters",
		"Voting members in etcd's membership, as the operator last recorded them.", keys, nil)
	healthy = prometheus.NewDesc("etcdplan_cluster_voters_healthy",
		"Voting members that answered with a leader when the operator last looked.", keys, nil)
	tolerated = prometheus.NewDesc("etcdplan_cluster_failures_tolerated",
		"Healthy voters beyond quorum: how many more may fail before the cluster takes no writes (below 0: it takes none now).", keys, nil)
	condition = prometheus.NewDesc("etcdplan_cluster_condition",
		"The cluster's status conditions: 1 for the status and reason each condition has.", append(keys, "type", "status", "reason"), nil)
	alarms = prometheus.NewDesc("etcdplan_cluster_alarms",
		"Members with an etcd alarm raised, by alarm (NOSPACE, CORRUPT).", append(keys, "alarm"), nil)
	lastBackup = prometheus.NewDesc("etcdplan_cluster_last_backup_timestamp_seconds",
		"When the newest successful backup of the cluster was taken (Unix seconds); 0 for a cluster with a backup schedule and no successful backup yet.", keys, nil)
	certExpiry = prometheus.NewDesc("etcdplan_cluster_certificate_expiry_timestamp_seconds",
		"When a certificate the cluster's TLS uses expires (Unix seconds), by the Secret that holds it.", append(keys, "secret"), nil)
	certRenew = prometheus.NewDesc("etcdplan_cluster_certificate_renew_timestamp_seconds",
		"When the operator renews a certificate it issued (Unix seconds): at two thirds of its life.", append(keys, "secret"), nil)
	scrapeErrors = prometheus.NewDesc("etcdplan_cluster_metrics_errors",
		"1 when the cluster metrics could not be read at this scrape.", nil, nil)
)

// Collector reads EtcdClusters, EtcdBackups and EtcdBackupSchedules through Reader (the
// manager's cached client) at each scrape.
type Collector struct {
	Reader client.Reader
}

func (c Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{replicas, voters, healthy, tolerated, condition, alarms, lastBackup, certExpiry, certRenew, scrapeErrors} {
		ch <- d
	}
}

func (c Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var clusters v1alpha1.EtcdClusterList
	var backups v1alpha1.EtcdBackupList
	var schedules v1alpha1.EtcdBackupScheduleList
	failed := 0.0
	for _, l := range []client.ObjectList{&clusters, &backups, &schedules} {
		if err := c.Reader.List(ctx, l); err != nil {
			failed = 1
		}
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrors, prometheus.GaugeValue, failed)
	newest := newestBackups(backups.Items, schedules.Items)
	for i := range clusters.Items {
		ec := &clusters.Items[i]
		collectCluster(ch, ec, newest)
	}
}

func collectCluster(ch chan<- prometheus.Metric, ec *v1alpha1.EtcdCluster, newest map[string]float64) {
	k := []string{ec.Namespace, ec.Name}
	gauge := func(d *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append(k, extra...)...)
	}
	all, up := ec.Status.Replicas, ec.Status.ReadyReplicas // voters, and those healthy
	gauge(replicas, float64(ec.Spec.Replicas))
	gauge(voters, float64(all))
	gauge(healthy, float64(up))
	if all > 0 {
		gauge(tolerated, float64(up-(all/2+1)))
	}
	for _, cond := range ec.Status.Conditions {
		gauge(condition, 1, cond.Type, string(cond.Status), cond.Reason)
	}
	// 0, not absent, when none is raised; status says "NOSPACE on member 8e9e05c52164694d".
	raised := map[string]int{"NOSPACE": 0, "CORRUPT": 0}
	for _, a := range ec.Status.Alarms {
		kind, _, _ := strings.Cut(a, " ")
		raised[kind]++
	}
	for kind, n := range raised {
		gauge(alarms, float64(n), kind)
	}
	if t, ok := newest[ec.Namespace+"/"+ec.Name]; ok {
		gauge(lastBackup, t)
	}
	if ec.Status.TLS != nil {
		for _, cs := range ec.Status.TLS.Certificates {
			gauge(certExpiry, float64(cs.NotAfter.Unix()), cs.SecretName)
			if cs.RenewAt != nil {
				gauge(certRenew, float64(cs.RenewAt.Unix()), cs.SecretName)
			}
		}
	}
}

// newestBackups maps "namespace/cluster" to when its newest successful backup was taken
// (one whose restore drill failed does not count), and to 0 for a cluster a schedule backs
// up that has none yet.
func newestBackups(backups []v1alpha1.EtcdBackup, schedules []v1alpha1.EtcdBackupSchedule) map[string]float64 {
	out := map[string]float64{}
	for _, s := range schedules {
		out[s.Namespace+"/"+s.Spec.ClusterRef.Name] = 0
	}
	for i := range backups {
		b := &backups[i]
		a := b.Status.Artifact
		if b.Status.Phase != v1alpha1.BackupSucceeded || a == nil || b.DrillFailed() {
			continue
		}
		key, t := b.Namespace+"/"+b.Spec.ClusterRef.Name, float64(a.TakenAt.Unix())
		if t > out[key] {
			out[key] = t
		}
	}
	return out
}
