package controller

import (
	"fmt"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
)

// plainTextHeld: the plan's current step is the first to refuse plain-text clients, while
// TLS is switched on for a running cluster (clients that do not speak TLS by then are cut
// off, which no look at the cluster can tell: a person says they are ready), or the first
// of switching TLS off.
func plainTextHeld(rec *v1alpha1.PlanStatus) bool {
	s := currentStep(rec)
	return s != nil && (s.Why == plan.WhyClientPlainTextOff || s.Why == plan.WhyTLSOff)
}

// plainTextMessage says what the held step does and how to let it run.
func plainTextMessage(c *v1alpha1.EtcdCluster, rec *v1alpha1.PlanStatus) string {
	if currentStep(rec).Why == plan.WhyTLSOff {
		return fmt.Sprintf("plan %s switches TLS off: members serve plain text beside TLS from its next step, and plain text alone at its end, "+
			"so clients' and peers' traffic is no longer encrypted or authenticated by certificates; %s", rec.ID, approveHow(c, rec))
	}
	secret := c.Spec.TLS.ClientSecretName
	if c.Status.TLS != nil && c.Status.TLS.ClientSecretName != "" {
		secret = c.Status.TLS.ClientSecretName
	}
	return fmt.Sprintf("plan %s next restarts %s without plain text: every member serves TLS beside plain text now, and from this step on "+
		"members refuse clients that do not speak TLS; move every client to TLS first (https://%s.%s.svc:%d, the client certificate and CA in Secret %s), "+
		"then %s",
		rec.ID, currentStep(rec).Member, vocab.ClientService(c.Name), c.Namespace, vocab.ClientPort, secret, approveHow(c, rec))
}
