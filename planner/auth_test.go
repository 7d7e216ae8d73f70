package planner

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/plan"
)

func withAuth(c Desired) Desired {
	c = withTLS(c, true, true)
	c.Auth = true
	return c
}

// Auth switched on for a running TLS cluster is one step, held for approval (its reason
// code says so); off likewise. Nothing restarts: every member already maps client
// certificates to users.
func TestAuthIsSwitchedOnAndOffWithoutARestart(t *testing.T) {
	w := running(withTLS(cluster(3, "3.6.16"), true, true), 3, "3.6.16")
	on := withAuth(cluster(3, "3.6.16"))
	p := Plan(on, w.observe())
	require.Equal(t, []string{"EnableAuth "}, summary(p))
	require.Equal(t, plan.WhyAuthOn, p.Steps[0].Why)
	require.Equal(t, plan.PreClusterHealthy, p.Steps[0].Precondition.Kind)
	converge(t, on, w)
	require.True(t, w.auth)

	off := withTLS(cluster(3, "3.6.16"), true, true)
	p = Plan(off, w.observe())
	require.Equal(t, []string{"DisableAuth "}, summary(p))
	require.Equal(t, plan.WhyAuthOff, p.Steps[0].Why)
	converge(t, off, w)
	require.False(t, w.auth)
}

// A cluster created asking for auth has it on right after its seed formed, before the other
// members join, and with no approval: no client used it without a user.
func TestAuthIsOnFromCreation(t *testing.T) {
	c := withAuth(cluster(3, "3.6.16"))
	w := running(c, 0, "3.6.16")
	w.clusterID, w.authFromCreation = "", true
	convergeWith(t, c, w, func(s plan.Step) {
		if s.Action == plan.EnableAuth {
			require.Equal(t, plan.WhyAuthAtCreation, s.Why)
			require.Len(t, w.members, 1, "before the other members join")
		}
	})
	require.True(t, w.auth)
	require.Len(t, w.members, 3)
}

// TLS and auth asked for at once: the TLS switch comes first, and auth goes on only once no
// member serves plain-text clients (the simulated cluster refuses it before). Both off at
// once: auth goes off first, while the operator is still a user by its certificate.
func TestAuthWaitsForClientTLS(t *testing.T) {
	w := running(cluster(3, "3.6.16"), 3, "3.6.16")
	on := withAuth(cluster(3, "3.6.16"))
	p := Plan(on, w.observe())
	require.Greater(t, len(p.Steps), 1)
	require.Equal(t, "EnableAuth ", summary(p)[len(p.Steps)-1])
	converge(t, on, w)
	require.True(t, w.auth)

	off := cluster(3, "3.6.16")
	p = Plan(off, w.observe())
	require.Equal(t, "DisableAuth ", summary(p)[0])
	converge(t, off, w)
	require.False(t, w.auth)
}

// The users of spec.auth.users are made before auth goes on, so they are served from its
// first moment, and again whenever the list changes; nothing is made while auth is not
// asked for.
func TestUsersAreMadeBeforeAuthGoesOn(t *testing.T) {
	w := running(withTLS(cluster(3, "3.6.16"), true, true), 3, "3.6.16")
	on := withAuth(cluster(3, "3.6.16"))
	on.Users = "u1"
	p := Plan(on, w.observe())
	require.Equal(t, []string{"UpdateUsers ", "EnableAuth "}, summary(p))
	require.Equal(t, plan.WhyUsersChanged, p.Steps[0].Why)
	converge(t, on, w)
	require.Equal(t, "u1", w.users)

	on.Users = ""
	require.Equal(t, []string{"UpdateUsers "}, summary(Plan(on, w.observe())), "users taken out are deleted")
	converge(t, on, w)
	off := withTLS(cluster(3, "3.6.16"), true, true)
	off.Users = "u2"
	require.Equal(t, []string{"DisableAuth "}, summary(Plan(off, w.observe())))
}

// Until etcd says whether auth is on (it could not be read), nothing is planned for it.
func TestAuthUnknownPlansNothing(t *testing.T) {
	w := running(withTLS(cluster(3, "3.6.16"), true, true), 3, "3.6.16")
	o := w.observe()
	o.Etcd.Auth = nil
	require.Empty(t, Plan(withAuth(cluster(3, "3.6.16")), o).Steps)
}
