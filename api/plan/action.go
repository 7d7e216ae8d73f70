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
)

// Recovers reports whether the action recovers from quorum loss: it can lose writes, so it
// waits for approval unless spec.recovery lets it run alone.
// A snapshot of a survivor in memory is the first step of such a recovery, approved with it.
func (a Action) Recovers() bool {
	return a == ForceNewCluster || a == RestoreFromBackup || a == SnapshotSurvivor
}
