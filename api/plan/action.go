package plan

// Action is one kind of step. The vocabulary is fixed: the executor knows how to apply
// each action and nothing else.
type Action string

const (
	// CreateSeed starts the first member of a new cluster on its own.
	CreateSeed Action = "CreateSeed"
	// AddLearner adds a member to etcd's membership as a non-voting learner.
	AddLearner Action = "AddLearner"
	// StartMember creates a member's volume and Pod (a new learner, or a member whose Pod is gone).
	StartMember Action = "StartMember"
	// CheckData starts a check Pod beside a voter's Pod that is going while no quorum can
	// form: it mounts the member's volume claim read-only and reads whether the member's
	// data is still there, while the old Pod stops. It changes nothing.
	CheckData Action = "CheckData"
	// PromoteLearner makes a caught-up learner a voter.
	PromoteLearner Action = "PromoteLearner"
	// TransferLeadership moves leadership from Member to Target.
	TransferLeadership Action = "TransferLeadership"
	// RemoveMember removes a member from etcd's membership.
	RemoveMember Action = "RemoveMember"
	// DeleteMember deletes the Pod and volume of a member that is no longer in the membership.
	DeleteMember Action = "DeleteMember"
	// StopMember deletes a member's Pod and keeps its volume and membership (replicas 0).
	StopMember Action = "StopMember"
	// RestartMember re-creates a member's Pod with the current configuration.
	RestartMember Action = "RestartMember"
	// UpgradeMember re-creates a member's Pod on a new etcd version, keeping its data.
	UpgradeMember Action = "UpgradeMember"
	// Compact compacts etcd's history up to the current revision: the earlier revisions of
	// keys go, never a key's current value.
	Compact Action = "Compact"
	// Defragment rewrites a member's database without its free pages; the member serves
	// nothing while it runs.
	Defragment Action = "Defragment"
	// DisarmAlarm clears a member's NOSPACE alarm.
	DisarmAlarm Action = "DisarmAlarm"
	// ExpandVolume asks a member's volume claim for spec.storage.size; its StorageClass
	// grows the volume in place.
	ExpandVolume Action = "ExpandVolume"
	// ForceNewCluster restarts a member alone on its data with etcd's --force-new-cluster:
	// etcd keeps what the member committed and drops every other member from the
	// membership. Only when a majority of voters lost their data; it can lose writes.
	ForceNewCluster Action = "ForceNewCluster"
	// RestoreFromBackup starts the cluster anew from a backup when every voter lost its
	// data: a new seed member restored from the snapshot, under a new etcd cluster ID, that
	// the other members then join. Writes after the backup are lost.
	RestoreFromBackup Action = "RestoreFromBackup"
	// SnapshotSurvivor stores a snapshot of a member that still runs alone with its data
	// in memory after a majority lost theirs, as a new EtcdBackup (Backup) of the cluster
	// naming the member: a snapshot needs no quorum. The recovery then restores whichever
	// of it and the newest backup holds the higher revision.
	SnapshotSurvivor Action = "SnapshotSurvivor"
	// RenewCertificate issues the certificate in Secret again from the cluster's CA (one
	// the operator issues, at two thirds of its life). etcd reads its certificate again at
	// every handshake, so no member restarts.
	RenewCertificate Action = "RenewCertificate"
	// AwaitCertificate waits until every member that mounts Secret serves the certificate
	// renewed in it (a Secret volume is updated in place within a minute or so).
	AwaitCertificate Action = "AwaitCertificate"
	// UpdatePeerURL moves a member's peer URL in etcd's membership to the other way the
	// member already serves peers (Why says which): TLS on the second peer port while peer
	// TLS is switched on, plain text on its plain port while it is switched off. Peers dial
	// it there from then on.
	UpdatePeerURL Action = "UpdatePeerURL"
	// RotateCA moves a rotation of the cluster's own CA (Secret) to its next stage, as Why
	// says: a new CA made and added to the trust bundle; the new CA issuing; the old CA out
	// of the trust bundle; the old CA dropped. Members read their trust bundle only at start:
	// the restarts between these steps are the plan's own.
	RotateCA Action = "RotateCA"
	// EnableAuth switches etcd's authentication on: the root user (its password from a
	// Secret) and the operator's user (its client certificate's common name, no password)
	// get the root role, auth is enabled, and every voter is asked, under the operator's
	// certificate, whether it is on. A voter that refuses the operator then has auth
	// switched off again with root's password, and the step fails.
	EnableAuth Action = "EnableAuth"
	// DisableAuth switches etcd's authentication off: every client is served without a
	// user from then on.
	DisableAuth Action = "DisableAuth"
	// UpdateUsers makes the users of spec.auth.users in etcd, each with the role of its
	// name holding exactly the permissions the spec lists, and deletes those the spec no
	// longer lists (with their roles).
	UpdateUsers Action = "UpdateUsers"
	// SnapshotSource stores a snapshot of an adopted cluster as an EtcdBackup (Backup) to
	// the cluster's backup destination, read from the leader once it is one of the cluster's
	// own members, before any source member leaves: the last point the source's data is
	// whole on its own members.
	SnapshotSource Action = "SnapshotSource"
	// Acknowledge changes nothing in etcd: it waits for approval of what only the user can
	// do (Why says what), and records that it was given.
	Acknowledge Action = "Acknowledge"
)

// Actions lists every action. A new action is decided wherever actions differ, and tests
// fail until it is: its facts below (a row in action_test.go) and a case in each switch
// that switch_test.go holds to every action.
var Actions = []Action{
	CreateSeed, AddLearner, StartMember, CheckData, PromoteLearner, TransferLeadership, RemoveMember, DeleteMember,
	StopMember, RestartMember, UpgradeMember, Compact, Defragment, DisarmAlarm, ExpandVolume,
	ForceNewCluster, RestoreFromBackup, SnapshotSurvivor, RenewCertificate, AwaitCertificate, UpdatePeerURL, RotateCA,
	EnableAuth, DisableAuth, UpdateUsers, SnapshotSource, Acknowledge,
}

// Recovers reports whether the action recovers from quorum loss: it can lose writes, so it
// waits for approval unless spec.recovery lets it run alone.
// A snapshot of a survivor in memory is the first step of such a recovery, approved with it.
func (a Action) Recovers() bool {
	return a == ForceNewCluster || a == RestoreFromBackup || a == SnapshotSurvivor
}

// TakesDown reports whether the action stops or removes its member while the cluster runs:
// the leader moves away first, and the step must leave a quorum of voters up. StopMember is
// not one: it stops members only to park the cluster or to clear the way for a recovery.
func (a Action) TakesDown() bool {
	switch a {
	case RemoveMember, UpgradeMember, RestartMember, Defragment:
		return true
	}
	return false
}

// Disrupts reports whether the action's member stops serving while the step runs.
func (a Action) Disrupts() bool { return a.TakesDown() || a == StopMember }

// ChangesMembership reports whether the action changes etcd's member list by a call that
// commits through a quorum. The recoveries make a membership anew without one and are not
// counted. Two callers need a wider set, each its own:
//   - NeedsLinearizable, to decide a step: adds the deletion of a member's volume and the
//     steps that take a member down, whose safety rests on who the members are (DESIGN 2a).
//   - ShowsInMembership, to count a step done: adds TransferLeadership, whose effect is read,
//     like a membership change, from etcd's view, which a lagging member shows stale. A
//     deletion shows in Kubernetes instead.
func (a Action) ChangesMembership() bool {
	switch a {
	case AddLearner, PromoteLearner, RemoveMember, UpdatePeerURL:
		return true
	}
	return false
}

// NeedsLinearizable reports whether the step is decided only on a member list read through
// a quorum: one member's own view may be stale, and says nothing of the members it does not
// list.
func (a Action) NeedsLinearizable() bool {
	return a.ChangesMembership() || a.TakesDown() || a.Deletes() == DataMemberVolume
}

// ShowsInMembership reports whether only a member list read through a quorum shows the
// step done: its effect is in etcd's membership or leader.
func (a Action) ShowsInMembership() bool { return a.ChangesMembership() || a == TransferLeadership }

// ChangesVoters reports whether the action adds or drops voters of a formed cluster once
// done: a review weighs the cluster after it as well as while it runs.
func (a Action) ChangesVoters() bool {
	switch a {
	case PromoteLearner, RemoveMember, ForceNewCluster, RestoreFromBackup:
		return true
	}
	return false
}

// StartsPod reports whether the step starts a Pod for its member (AddLearner: the Pod
// its StartMember starts), which serves clients and peers as the step's Listen says.
func (a Action) StartsPod() bool {
	switch a {
	case CreateSeed, RestoreFromBackup, ForceNewCluster, AddLearner, StartMember, RestartMember, UpgradeMember:
		return true
	}
	return false
}

// Showing is how soon a look shows an applied action's effect; the executor looks again
// at once for those that show within moments, and goes on with the next step.
type Showing int

const (
	// ShowsLater: the effect takes seconds or more (a Pod starts, a snapshot is stored).
	ShowsLater Showing = iota
	// ShowsAtOnce: etcd's answer to the call says the effect is in place.
	ShowsAtOnce
	// ShowsInCache: an object made, deleted or changed (a member's new Pod, a deletion, a
	// grown claim), shown once the cache has the watch event, a few ms later.
	ShowsInCache
)

// Shows says how soon a look shows the action's effect. A member's Pod started shows once
// it exists: the planner starts a member that has none, and whether it runs is for the
// next steps' preconditions to say.
func (a Action) Shows() Showing {
	switch a {
	case AddLearner, PromoteLearner, RemoveMember, TransferLeadership, Compact, Defragment, DisarmAlarm, RenewCertificate, UpdatePeerURL, RotateCA,
		EnableAuth, DisableAuth, UpdateUsers, Acknowledge:
		return ShowsAtOnce
	case DeleteMember, ExpandVolume, StartMember, CheckData:
		return ShowsInCache
	}
	return ShowsLater
}

// Shows says how soon a look shows the step's effect: as its action's, but an early
// snapshot of a survivor is done once its EtcdBackup is asked for, an object made.
func (s Step) Shows() Showing {
	if s.Why == WhySurvivorSnapshotEarly {
		return ShowsInCache
	}
	return s.Action.Shows()
}

// Data is the data an action can delete.
type Data int

const (
	// DataNone: the action deletes no data.
	DataNone Data = iota
	// DataMemberVolume: the volume of a member out of etcd's membership; the members that
	// stay hold the data.
	DataMemberVolume
	// DataHistory: the revisions before the current one; every key keeps its value.
	DataHistory
	// DataWrites: the writes a recovery's source lacks (those the surviving member did not
	// receive, or those after the backup).
	DataWrites
)

// Deletes says what data the action can delete, for the people who approve a plan.
func (a Action) Deletes() Data {
	switch a {
	case DeleteMember:
		return DataMemberVolume
	case Compact:
		return DataHistory
	case ForceNewCluster, RestoreFromBackup:
		return DataWrites
	}
	return DataNone
}

// Group is how a plan's summary names what an action does to its member.
type Group string

const (
	// GroupNone: the summary does not name the action's member.
	GroupNone          Group = ""
	GroupJoining       Group = "Joining"
	GroupLeaving       Group = "Leaving"
	GroupRestarting    Group = "Restarting"
	GroupStopping      Group = "Stopping"
	GroupDefragmenting Group = "Defragmenting"
)

// Groups lists the groups in the order a summary names them.
var Groups = []Group{GroupJoining, GroupLeaving, GroupRestarting, GroupStopping, GroupDefragmenting}

// Group says under which group a plan's summary names the action's member.
func (a Action) Group() Group {
	switch a {
	case CreateSeed, RestoreFromBackup, AddLearner:
		return GroupJoining
	case RemoveMember:
		return GroupLeaving
	case RestartMember, UpgradeMember:
		return GroupRestarting
	case StopMember:
		return GroupStopping
	case Defragment:
		return GroupDefragmenting
	}
	return GroupNone
}
