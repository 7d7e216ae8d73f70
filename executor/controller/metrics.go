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
	stepWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "etcdplan_step_wait_seconds",
		Help: "Time a step waited, by the operator's clock: on its precondition (start to applied) " +
			"and on its effect (applied until the cluster shows it).",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
	}, []string{"action", "on"})
)

func init() {
	metrics.Registry.MustRegister(stepsTotal, stepDuration, stepWait)
}
