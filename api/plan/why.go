package plan

// Why is a step's reason code: why the planner chose the step, stable across versions. The
// step's Reason words it for people, with its parameters, and may be reworded; the plan ID
// hashes the code, so rewording a reason leaves plan IDs, and the approvals given to them,
// as they are. A code names one reason; the step's action and member say what it acts on.
type Why string

// Bootstrap.
const (
	// WhyBootstrap: the cluster never formed; one seed member starts it.
	WhyBootstrap Why = "Bootstrap"
	// WhyBootstrapRestore: the cluster never formed; its seed is restored from
	// spec.bootstrap.restore.
	WhyBootstrapRestore Why = "BootstrapRestore"
)

// Repairs: members that are down or whose data is gone.
const (
	// WhyPodGone: a voter holding its data has no Pod (or its Pod ended or is going).
	WhyPodGone Why = "PodGone"
	// WhyShowData: a majority of voters lost their data; a voter runs to show whether it
	// kept its own before a recovery compares the survivors.
	WhyShowData Why = "ShowData"
	// WhyCheckData: a voter's Pod is going while no quorum can form; a check Pod beside it
	// reads whether its volume still holds its data, so a recovery need not wait for a new
	// Pod to start on the claim once the old one is gone.
	WhyCheckData Why = "CheckData"
	// WhyMemberDown: a voter that does not run is restarted on the new spec first:
	// restarting it costs nothing.
	WhyMemberDown Why = "MemberDown"
	// WhyMemberSilent: a voter that does not answer is restarted on the new spec while the
	// others keep quorum without it.
	WhyMemberSilent Why = "MemberSilent"
	// WhyMemberLost: a voter lost its data; it is removed so a new member can replace it.
	WhyMemberLost Why = "MemberLost"
)

// Membership changes.
const (
	// WhyLearnerLost: a learner lost its data; it is removed and added anew.
	WhyLearnerLost Why = "LearnerLost"
	// WhyLearnerStalled: a learner did not catch up within the progress deadline.
	WhyLearnerStalled Why = "LearnerStalled"
	// WhyLearnerNotNeeded: the voters reach spec.replicas without the learner.
	WhyLearnerNotNeeded Why = "LearnerNotNeeded"
	// WhyLearnerPodGone: a learner the spec needs has no Pod.
	WhyLearnerPodGone Why = "LearnerPodGone"
	// WhyLearnerToVoter: a learner the spec needs becomes a voter.
	WhyLearnerToVoter Why = "LearnerToVoter"
	// WhyScaleUp: fewer voters than spec.replicas; a member joins.
	WhyScaleUp Why = "ScaleUp"
	// WhyScaleDown: more voters than spec.replicas; a member leaves.
	WhyScaleDown Why = "ScaleDown"
	// WhyReplacement: a member joins to replace one that cannot be changed in place (its
	// volume's class or size, or its data in memory).
	WhyReplacement Why = "Replacement"
	// WhyReplaced: a member leaves once its replacement joined.
	WhyReplaced Why = "Replaced"
	// WhyTemporaryMember: a two-member cluster takes a third member while each of its
	// two restarts or is defragmented.
	WhyTemporaryMember Why = "TemporaryMember"
	// WhyNotAMember: etcd's membership no longer lists the member; its Pod and volume go.
	WhyNotAMember Why = "NotAMember"
	// WhyLeftInRecovery: the member left etcd's membership in a recovery; its Pod goes, its
	// volume claim is kept.
	WhyLeftInRecovery Why = "LeftInRecovery"
	// WhyParked: spec.replicas is 0; Pods stop, volumes and membership stay.
	WhyParked Why = "Parked"
)

// Leadership: it moves away before the leader is disrupted.
const (
	// WhyLeaderLeaves: the leader is the member a scale-down removes.
	WhyLeaderLeaves Why = "LeaderLeaves"
	// WhyLeaderRestartsLast: the leader is restarted last in a rolling change.
	WhyLeaderRestartsLast Why = "LeaderRestartsLast"
	// WhyLeaderDefragmentedLast: the leader is defragmented last.
	WhyLeaderDefragmentedLast Why = "LeaderDefragmentedLast"
)

// Spec changes rolled onto members.
const (
	// WhyVersionChanged: spec.version differs from the version the member runs.
	WhyVersionChanged Why = "VersionChanged"
	// WhyConfigChanged: spec fields the member's Pod is rendered from changed.
	WhyConfigChanged Why = "ConfigChanged"
	// WhySizeChanged: spec.storage.size is larger than the member's volume, and its class
	// grows volumes in place.
	WhySizeChanged Why = "SizeChanged"
)

// Recovery from quorum loss.
const (
	// WhySurvivorRestartsAlone: a majority of voters lost their data; the most recent
	// survivor restarts alone with --force-new-cluster.
	WhySurvivorRestartsAlone Why = "SurvivorRestartsAlone"
	// WhySurvivorInMemory: a survivor still runs with its data in memory; its snapshot is
	// stored before the cluster starts anew.
	WhySurvivorInMemory Why = "SurvivorInMemory"
	// WhySurvivorSnapshot: the most recent survivor keeps its data on its volume, and a
	// backup destination is known: its snapshot is stored, and every member is restored
	// from it at once (faster than a restart alone and joins one by one).
	WhySurvivorSnapshot Why = "SurvivorSnapshot"
	// WhySurvivorSnapshotEarly: no quorum answers, and spec.recovery lets a recovery run
	// on its own: the snapshot of the most recent voter that answers is stored at once,
	// while the others show whether they kept their data. A recovery that restores every
	// member from that voter takes it as its own, as long as the voter committed nothing
	// since; else it is one more backup.
	WhySurvivorSnapshotEarly Why = "SurvivorSnapshotEarly"
	// WhyOldClusterPod: a Pod of the cluster that lost its quorum stops before the cluster
	// starts anew from a backup.
	WhyOldClusterPod Why = "OldClusterPod"
	// WhyNoSurvivor: no voter can bring the cluster back; it starts anew from a backup.
	WhyNoSurvivor Why = "NoSurvivor"
)

// Space.
const (
	// WhyNoSpaceCompact: a NOSPACE alarm; the history is compacted so its space can be
	// reclaimed.
	WhyNoSpaceCompact Why = "NoSpaceCompact"
	// WhyNoSpaceDefragment: a NOSPACE alarm; the member's database holds free space to
	// give back.
	WhyNoSpaceDefragment Why = "NoSpaceDefragment"
	// WhyNoSpaceDisarm: every member's database is under its quota again.
	WhyNoSpaceDisarm Why = "NoSpaceDisarm"
	// WhyDefragScheduled: spec.maintenance.defrag.schedule came while the member's
	// database held free space.
	WhyDefragScheduled Why = "DefragScheduled"
	// WhyDefragThreshold: the member's free space reached
	// spec.maintenance.defrag.thresholdPercent.
	WhyDefragThreshold Why = "DefragThreshold"
)

// Certificates.
const (
	// WhyCertificateDue: a certificate the operator issued reached two thirds of its life.
	WhyCertificateDue Why = "CertificateDue"
	// WhyCertificateUnserved: a certificate was renewed, and a member that mounts it does
	// not serve it yet.
	WhyCertificateUnserved Why = "CertificateUnserved"
)

// Switching TLS on for a running cluster.
const (
	// WhyTLSBeside: the spec asks for TLS, which the member does not serve yet; it restarts
	// serving TLS beside plain text, so no client and no peer is cut off.
	WhyTLSBeside Why = "TLSBeside"
	// WhyPeerURLToTLS: every member serves peer TLS; the member's peer URL moves to it.
	WhyPeerURLToTLS Why = "PeerURLToTLS"
	// WhyClientPlainTextOff: the first member to stop serving plain-text clients; the plan
	// waits for approval first, since clients that do not speak TLS are refused from then.
	WhyClientPlainTextOff Why = "ClientPlainTextOff"
	// WhyPlainTextOff: the member stops serving plain text where TLS replaced it.
	WhyPlainTextOff Why = "PlainTextOff"
)

// Switching TLS off for a running cluster.
const (
	// WhyTLSOff: the first member to serve plain text beside TLS as the spec switches TLS
	// off; the plan waits for approval first.
	WhyTLSOff Why = "TLSOff"
	// WhyPlainBeside: the member restarts serving plain text beside TLS.
	WhyPlainBeside Why = "PlainBeside"
	// WhyPeerURLToPlain: every member serves peers plain text; the member's peer URL moves
	// to it.
	WhyPeerURLToPlain Why = "PeerURLToPlain"
	// WhyTLSGone: the member stops serving TLS where plain text replaced it.
	WhyTLSGone Why = "TLSGone"
)

// Rotating the cluster's own CA (or a trust bundle that changed), in three passes. A
// change of spec.tls's source takes the same passes and codes, the new source's CA for
// the new CA, and restarts members onto its certificates in pass 2 (WhySourceServed).
const (
	// WhyCANew: a rotation was asked; a new CA is made and trusted beside the old one.
	WhyCANew Why = "CANew"
	// WhyTrustBoth: pass 1, the member restarts trusting the old and the new CA.
	WhyTrustBoth Why = "TrustBoth"
	// WhyCAIssues: every member trusts the new CA; it issues from now on.
	WhyCAIssues Why = "CAIssues"
	// WhyCARotated: pass 2, a certificate the old CA issued is issued again from the new.
	WhyCARotated Why = "CARotated"
	// WhySourceServed: pass 2 of a change of source, the member restarts serving the new
	// source's certificates (its Pod mounts other Secrets).
	WhySourceServed Why = "SourceServed"
	// WhyCARetired: every certificate comes from the new CA; the old one leaves the trust
	// bundle.
	WhyCARetired Why = "CARetired"
	// WhyTrustNew: pass 3, the member restarts trusting the new CA alone.
	WhyTrustNew Why = "TrustNew"
	// WhyCADropped: every member trusts the new CA alone; the old one is dropped.
	WhyCADropped Why = "CADropped"
	// WhyTrustChanged: the trust bundle the member mounts changed since it started (a
	// user's Secret, or a CA cert-manager renewed); it restarts to read it.
	WhyTrustChanged Why = "TrustChanged"
)

// Switching etcd's authentication on or off.
const (
	// WhyAuthOn: the spec asks for auth on a cluster that served clients without it; the
	// plan waits for approval first, since clients without a user are refused from then.
	WhyAuthOn Why = "AuthOn"
	// WhyAuthAtCreation: the cluster was created with spec.auth: no client used it
	// without a user, and no approval is needed.
	WhyAuthAtCreation Why = "AuthAtCreation"
	// WhyAuthOff: the spec no longer asks for auth; the plan waits for approval first, since
	// every client is served without a user from then.
	WhyAuthOff Why = "AuthOff"
	// WhyUsersChanged: spec.auth.users differs from the users made in etcd.
	WhyUsersChanged Why = "UsersChanged"
)

// Adopting a running cluster (spec.bootstrap.join).
const (
	// WhyAdoptJoin: a member of the operator joins the adopted cluster as a learner (then
	// started and promoted as any learner), one at a time.
	WhyAdoptJoin Why = "AdoptJoin"
	// WhyAdoptLeader: leadership moves from a source member to one of the operator's
	// before a source member leaves.
	WhyAdoptLeader Why = "AdoptLeader"
	// WhySourceLeaves: a source member leaves, followers first.
	WhySourceLeaves Why = "SourceLeaves"
	// WhySourceLast: the last source member leaves; the plan waits for approval first,
	// since clients of the source's endpoints must have moved to the cluster's own.
	WhySourceLast Why = "SourceLast"
	// WhyAuthAdopted: the source has authentication on; the operator's users (its client
	// certificates' common names) get the root role in it before any member joins.
	WhyAuthAdopted Why = "AuthAdopted"
	// WhyAdoptRollback: spec.bootstrap.join was removed before a source member left; the
	// operator's members leave the source again (leadership moves back to it first).
	WhyAdoptRollback Why = "AdoptRollback"
	// WhySourceSnapshot: a snapshot of the adopted cluster is stored before the first
	// source member leaves.
	WhySourceSnapshot Why = "SourceSnapshot"
	// WhySourceStopped: every source member left; the user acknowledges that their
	// processes are stopped and their data directories wiped.
	WhySourceStopped Why = "SourceStopped"
)

// Whys lists every reason code a step can carry.
var Whys = []Why{
	WhyBootstrap, WhyBootstrapRestore,
	WhyPodGone, WhyShowData, WhyCheckData, WhyMemberDown, WhyMemberSilent, WhyMemberLost,
	WhyLearnerLost, WhyLearnerStalled, WhyLearnerNotNeeded, WhyLearnerPodGone, WhyLearnerToVoter,
	WhyScaleUp, WhyScaleDown, WhyReplacement, WhyReplaced, WhyTemporaryMember, WhyNotAMember, WhyLeftInRecovery, WhyParked,
	WhyLeaderLeaves, WhyLeaderRestartsLast, WhyLeaderDefragmentedLast,
	WhyVersionChanged, WhyConfigChanged, WhySizeChanged,
	WhySurvivorRestartsAlone, WhySurvivorInMemory, WhySurvivorSnapshot, WhySurvivorSnapshotEarly, WhyOldClusterPod, WhyNoSurvivor,
	WhyNoSpaceCompact, WhyNoSpaceDefragment, WhyNoSpaceDisarm, WhyDefragScheduled, WhyDefragThreshold,
	WhyCertificateDue, WhyCertificateUnserved,
	WhyTLSBeside, WhyPeerURLToTLS, WhyClientPlainTextOff, WhyPlainTextOff,
	WhyTLSOff, WhyPlainBeside, WhyPeerURLToPlain, WhyTLSGone,
	WhyCANew, WhyTrustBoth, WhyCAIssues, WhyCARotated, WhySourceServed, WhyCARetired, WhyTrustNew, WhyCADropped, WhyTrustChanged,
	WhyAuthOn, WhyAuthAtCreation, WhyAuthOff, WhyUsersChanged,
	WhyAdoptJoin, WhyAdoptLeader, WhySourceLeaves, WhySourceLast, WhyAuthAdopted, WhyAdoptRollback,
	WhySourceSnapshot, WhySourceStopped,
}
