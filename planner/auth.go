package planner

import "github.com/etcdplan/etcdplan/api/plan"

// switchAuth switches etcd's authentication on or off as the spec asks, once etcd says how
// it stands, the users of spec.auth.users made first (so they are served from the moment
// auth is on) and again whenever they change; before scaling, so a new cluster has it on before its other members join. The
// operator is an etcd user by its client certificate: auth goes on only once every member
// serves clients TLS alone (each with --client-cert-auth), after a TLS switch, and goes
// off before client TLS does.
func switchAuth(m *model, d Desired) (plan.Step, bool) {
	if !m.bootstrapped || m.auth == nil || *m.auth == d.Auth && (!d.Auth || m.users == d.Users) {
		return plan.Step{}, false
	}
	pre := plan.Precondition{Kind: plan.PreClusterHealthy}
	if d.Auth && m.users != d.Users {
		return plan.Step{Action: plan.UpdateUsers, Precondition: pre, Why: plan.WhyUsersChanged,
			Reason: "spec.auth.users differs from the users made in etcd: each gets the role of its name with the permissions listed, and users no longer listed are deleted"}, true
	}
	if !d.Auth {
		return plan.Step{Action: plan.DisableAuth, Precondition: pre, Why: plan.WhyAuthOff,
			Reason: "spec.auth no longer asks for authentication: every client is served without an etcd user from this step on"}, true
	}
	if !d.ClientTLS || anyPod(m, func(mm *member) bool { return mm.serves(d).Client != plan.ListenTLS }) {
		return plan.Step{}, false
	}
	s := plan.Step{Action: plan.EnableAuth, Precondition: pre, Why: plan.WhyAuthOn,
		Reason: "spec.auth asks for authentication: root and the operator's user get the root role, then auth is on, and every client needs an etcd user from this step on"}
	if m.authFromCreation {
		s.Why, s.Reason = plan.WhyAuthAtCreation, "the cluster was created with spec.auth: root and the operator's user get the root role, then auth is on before the other members join"
	}
	return s, true
}
