package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	stepsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdplan_plan_steps_total",
		Help: "Plan steps by action and result (applied, succeeded, error).",
	}, []string{"action", "result"})
	stepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "etcdplan_step_duration_seconds",
		Help:    "Time from a step's start until the cluster shows its effect.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
	}, []string{"action"})
	clusterMembers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdplan_cluster_members",
		Help: "Voting members per cluster by state (healthy, unhealthy).",
	}, []string{"cluster", "state"})
)

func init() {
	metrics.Registry.MustRegister(stepsTotal, stepDuration, clusterMembers)
}
