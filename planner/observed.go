package planner

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/vocab"
)

// ObservedFormatVersion is the version of Observed's JSON form. Version 2 split a member's
// health into facts (answering, the leader it knows) and records whether the member list was
// read linearizably; Upgrade reads version 1.
const ObservedFormatVersion = 2

// Observed is everything the planner knows about a cluster as it is: the Kubernetes objects
// of its members and etcd's own view. The executor gathers it; it is plain data, so it can be
// saved to a file and planned against offline.
type Observed struct {
	FormatVersion int `json:"formatVersion"`
	// ClusterID is the bootstrapped cluster's ID from status; empty before bootstrap.
	ClusterID string `json:"clusterID,omitempty"`
	// RestoredFrom is the snapshot the seed was restored from (from status).
	RestoredFrom string `json:"restoredFrom,omitempty"`
	// NextOrdinal is the lowest ordinal a new member may take (from status).
	NextOrdinal int `json:"nextOrdinal,omitempty"`
	// Recorded is the membership last recorded in status: when no member answers, it is the
	// only record of members whose Pod and volume are both gone.
	Recorded []RecordedMember `json:"recorded,omitempty"`
	// StalledLearners are the member IDs of learners whose promotion passed its progress
	// deadline (from status): they are removed, and new members join in their place.
	StalledLearners []string `json:"stalledLearners,omitempty"`
	// DefragDue are the member IDs that scheduled defragmentation has still to do (from
	// status): the schedule came, and they were fragmented then.
	DefragDue []string `json:"defragDue,omitempty"`
	// Members are the member Pods and volumes found in Kubernetes, by member name.
	Members []Member `json:"members,omitempty"`
	// Backup is the newest successful backup of this cluster (taken from its etcd cluster
	// ID); nil when there is none. It is what a cluster that lost every voter's data
	// restores.
	Backup *Backup `json:"backup,omitempty"`
	// SnapshotTo is where a recovery stores the snapshot of a member that still runs alone
	// with its data in memory: the destination of the cluster's newest backup, else of its
	// backup schedule (a URI); "" when none is known.
	SnapshotTo string `json:"snapshotTo,omitempty"`
	// Snapshots are the EtcdBackups of one named member (spec.member) of this cluster: those
	// a recovery took of a member that ran alone with its data in memory. Backup leaves
	// them out.
	Snapshots []MemberSnapshot `json:"snapshots,omitempty"`
	// Etcd is etcd's own view; nil when no member answered.
	Etcd *EtcdView `json:"etcd,omitempty"`
	// Renewals are the certificates the operator issued that are to be renewed, by the
	// executor's clock and its TLS dials to the members.
	Renewals []Renewal `json:"renewals,omitempty"`
	// Trust identifies the trust bundles a member Pod started now mounts (as Pod.Trust);
	// "" when not known.
	Trust string `json:"trust,omitempty"`
	// CA is where a rotation of the cluster's own CA, or a change of spec.tls's source,
	// stands; nil when none is asked or under way.
	CA *CARotation `json:"ca,omitempty"`
	// AuthFromCreation: the cluster was created asking for auth (from status), so no
	// client used it without a user.
	AuthFromCreation bool `json:"authFromCreation,omitempty"`
	// Users identifies the users of spec.auth.users made in this etcd cluster (from
	// status; "" for none).
	Users string `json:"users,omitempty"`
	// Join is the adoption of a running cluster (spec.bootstrap.join), as status records
	// it; nil when none was asked.
	Join *Join `json:"join,omitempty"`
}

// Join is an adoption of a running cluster: the source's members, which the operator does
// not run, leave one at a time while its own members join.
type Join struct {
	// Source are the source's members by ID, as its member list first showed them.
	Source []RecordedMember `json:"source,omitempty"`
	// SourceLeft: a source member left; the adoption cannot be rolled back any more.
	SourceLeft bool `json:"sourceLeft,omitempty"`
	// UsersMade: the operator's users were made in a source whose authentication is on.
	UsersMade bool `json:"usersMade,omitempty"`
	// AllLeft: every source member left, and the user has not yet acknowledged that their
	// processes are stopped and their data wiped.
	AllLeft bool `json:"allLeft,omitempty"`
	// Peers are, by member ID, the members etcd counts as a member's active peers (raft
	// messages pass between them), read from its metrics while leadership is to move from
	// the source to one of the cluster's own; a member not read is absent.
	Peers map[string][]string `json:"peers,omitempty"`
	// Problems are what the executor found that the source cannot be adopted for (it does
	// not answer, its member list cannot be read through a quorum, its client URLs' scheme
	// is not the cluster's own).
	Problems []string `json:"problems,omitempty"`
}

// sourceID reports whether id is one of the source's members.
func (j *Join) sourceID(id string) bool {
	return j != nil && slices.ContainsFunc(j.Source, func(r RecordedMember) bool { return r.ID == id })
}

// CARotation is a rotation of the cluster's own CA, by the stage its CA Secret records.
type CARotation struct {
	Stage CAStage `json:"stage"`
	// Secret is the CA Secret.
	Secret string `json:"secret"`
	// Leaves are the certificates the cluster's CA issued, in the order Renewals lists them:
	// each is issued again from the new CA once it issues.
	Leaves []Renewal `json:"leaves,omitempty"`
	// PeerLeaves: the CA issues each member's peer certificate, when its Pod is first made.
	PeerLeaves bool `json:"peerLeaves,omitempty"`
	// Source is, for a change of spec.tls's source rather than a rotation, the change in
	// words ("Auto to Provided"). The new CA is then the new source's, and its certificates
	// are in the new source's Secrets, which a member mounts only in a Pod made anew: pass 2
	// restarts each member onto them instead of issuing every certificate again.
	Source string `json:"source,omitempty"`
}

// CAStage is how far a rotation of the cluster's own CA went.
type CAStage string

const (
	// CAAsked: a rotation is asked; no new CA is trusted yet.
	CAAsked CAStage = "Asked"
	// CATrusting: the new CA is in the trust bundle beside the old one, which still issues.
	CATrusting CAStage = "Trusting"
	// CAIssuing: the new CA issues; the old one is still in the trust bundle.
	CAIssuing CAStage = "Issuing"
	// CARetiring: the trust bundle holds the new CA alone; the old one is kept until every
	// member started with it.
	CARetiring CAStage = "Retiring"
)

// Pass is the pass of the rotation the stage belongs to: 1 trust old and new, 2 issue from
// the new, 3 trust the new alone.
func (s CAStage) Pass() int {
	return map[CAStage]int{CAAsked: 1, CATrusting: 1, CAIssuing: 2, CARetiring: 3}[s]
}

// Renewal is a certificate to renew, by the Secret that holds it.
type Renewal struct {
	Secret string `json:"secret"`
	// Rotated: the certificate is issued again because the cluster's CA was rotated (it
	// was issued by the old one), not because of its age.
	Rotated bool `json:"rotated,omitempty"`
	// Unserved: the certificate was renewed, and a member that mounts it does not serve the
	// new one yet (a Secret volume is updated within a minute or so); else it reached two
	// thirds of its life.
	Unserved bool `json:"unserved,omitempty"`
	// Mounted: members mount the Secret and serve its certificate, so a renewal is followed
	// by a wait until they serve the new one.
	Mounted bool `json:"mounted,omitempty"`
}

// Backup is a stored snapshot of the cluster, as an EtcdBackup records it.
type Backup struct {
	// Name is the EtcdBackup's.
	Name string `json:"name"`
	// Revision is the etcd revision the snapshot holds (or a later one).
	Revision int64 `json:"revision"`
	// TakenAt is when it was taken, in RFC 3339.
	TakenAt string `json:"takenAt"`
	// Verified: a restore drill of it found what the cluster held.
	Verified bool `json:"verified,omitempty"`
	// Drill is how far its restore drill went when none passed; empty when not known.
	Drill BackupDrill `json:"drill,omitempty"`
	// Alternative is the cluster's newest verified backup when this one is not verified
	// and newer: a restore could take it instead, losing the writes in between.
	Alternative *Backup `json:"alternative,omitempty"`
}

// BackupDrill is how far a backup's restore drill went, short of passing.
type BackupDrill string

const (
	// DrillNone: no drill was asked for.
	DrillNone BackupDrill = "None"
	// DrillNotDone: a drill was asked for and has no verdict yet: it runs, or it could not
	// run and is tried again.
	DrillNotDone BackupDrill = "NotDone"
)

func (b *Backup) String() string {
	drill := ""
	switch {
	case b.Verified:
		drill = ", verified by a restore drill"
	case b.Drill == DrillNone:
		drill = ", not drilled"
	case b.Drill == DrillNotDone:
		drill = ", its restore drill not done"
	}
	if a := b.Alternative; a != nil {
		drill += fmt.Sprintf("; the newest verified backup, EtcdBackup %s of revision %d taken %s, is the alternative: "+
			"delete the EtcdBackups newer than it to restore it instead", a.Name, a.Revision, a.TakenAt)
	}
	return fmt.Sprintf("EtcdBackup %s (revision %d, taken %s%s)", b.Name, b.Revision, b.TakenAt, drill)
}

// MemberSnapshot is an EtcdBackup of one named member.
type MemberSnapshot struct {
	// Backup names it; its revision and time once it succeeded.
	Backup
	// MemberID is the member it reads (spec.member).
	MemberID string `json:"memberID"`
	// Member is that member's name.
	Member string `json:"member,omitempty"`
	// RaftTerm and RaftIndex are the member's when the snapshot was asked for (0: not
	// recorded): a member that reports the same has committed nothing since.
	RaftTerm  uint64 `json:"raftTerm,omitempty"`
	RaftIndex uint64 `json:"raftIndex,omitempty"`
	// Phase is the EtcdBackup's: Pending, Running, Succeeded or Failed.
	Phase string `json:"phase,omitempty"`
	// Message says why it failed.
	Message string `json:"message,omitempty"`
}

// Snapshot phases the planner tells apart.
const (
	SnapshotSucceeded = "Succeeded"
	SnapshotFailed    = "Failed"
)

// DescribeBackup describes the backup of that name, as the newest backup or a member's
// snapshot records it; by its name alone when neither is it.
func (o Observed) DescribeBackup(name string) string {
	if o.Backup != nil && o.Backup.Name == name {
		return o.Backup.String()
	}
	for _, s := range o.Snapshots {
		if s.Name == name && s.Phase == SnapshotSucceeded {
			return s.Backup.String()
		}
	}
	return "EtcdBackup " + name
}

// RecordedMember is a member as last recorded in status.
type RecordedMember struct {
	Name    string `json:"name"`
	ID      string `json:"id,omitempty"`
	Learner bool   `json:"learner,omitempty"`
}

// Member is one member's Kubernetes objects.
type Member struct {
	Name string `json:"name"`
	Pod  *Pod   `json:"pod,omitempty"`
	PVC  *PVC   `json:"pvc,omitempty"`
	// Check is what a check Pod (CheckData) read of the member's volume claim as it is
	// now; nil when none did.
	Check *DataCheck `json:"check,omitempty"`
}

// DataCheck is a check Pod's reading of a member's data directory, made beside the member's
// going Pod (CheckData).
type DataCheck struct {
	// DataLost: the member's data directory holds no member data.
	DataLost bool `json:"dataLost,omitempty"`
	// PodGone: the member Pod it was made beside is gone or ended: no etcd of it can write
	// the directory again.
	PodGone bool `json:"podGone,omitempty"`
}

// Pod is what the planner needs of a member Pod.
type Pod struct {
	// Restoring is the backup the member is the new seed of, for members in memory, whose
	// Pod carries the mark a claim carries otherwise (PVC.Restoring).
	Restoring *Backup `json:"restoring,omitempty"`
	// Running: the etcd container runs.
	Running bool `json:"running,omitempty"`
	// Ready: the Pod passes its readiness probe.
	Ready bool `json:"ready,omitempty"`
	// Deleting: the Pod has a deletion timestamp.
	Deleting bool `json:"deleting,omitempty"`
	// Seed: the Pod was created to bootstrap a new cluster (initial-cluster-state new).
	Seed bool `json:"seed,omitempty"`
	// Failed: the Pod ended for good (member Pods never restart in place); its member needs
	// a new Pod.
	Failed bool `json:"failed,omitempty"`
	// DataLost: the member had joined the cluster but its data directory is empty.
	DataLost bool `json:"dataLost,omitempty"`
	// PreflightError: the preflight check failed without showing the data gone (its data
	// directory could not be read); the exit code and the check's words. The member is
	// down, not lost: its data may be intact.
	PreflightError string `json:"preflightError,omitempty"`
	// Version is the etcd version of the Pod's image.
	Version string `json:"version,omitempty"`
	// ConfigHash is the configuration the Pod was rendered from (see ConfigHash).
	ConfigHash string `json:"configHash,omitempty"`
	// ConfigFields is the same per field (see Desired.ConfigFields); empty on Pods of
	// earlier versions.
	ConfigFields string `json:"configFields,omitempty"`
	// IP is the Pod's address.
	IP string `json:"ip,omitempty"`
	// Listen is how the Pod serves clients and peers when not as the spec says: it was
	// started before TLS was switched on, or while the switch was under way.
	Listen plan.Listen `json:"listen,omitzero"`
	// Trust identifies the trust bundles the Pod mounted when it was made (its
	// annotation): the CAs its etcd trusts. "" on Pods of earlier versions.
	Trust string `json:"trust,omitempty"`
}

// PVC is what the planner needs of a member's volume claim.
type PVC struct {
	Bound    bool `json:"bound,omitempty"`
	Deleting bool `json:"deleting,omitempty"`
	// MemberID is the etcd member ID recorded on the claim once the member joined.
	MemberID string `json:"memberID,omitempty"`
	// Version is the etcd version the member last answered with, recorded on the claim:
	// the version its data was last served by, known even while no Pod runs.
	Version string `json:"version,omitempty"`
	// PeerURL is the member's peer URL as etcd's member list last showed it, recorded on
	// the claim: known even while no member answers.
	PeerURL string `json:"peerURL,omitempty"`
	// StorageClass is the claim's class, and Bytes the size it requests (0: not known).
	StorageClass string `json:"storageClass,omitempty"`
	Bytes        int64  `json:"bytes,omitempty"`
	// Expandable: the class allows volume expansion; nil when the class could not be read.
	Expandable *bool `json:"expandable,omitempty"`
	// ForceNewCluster: the member was chosen to restart alone with --force-new-cluster (a
	// recovery from quorum loss is under way): its Pod may be gone meanwhile.
	ForceNewCluster bool `json:"forceNewCluster,omitempty"`
	// SurvivorSnapshot: the member was chosen, in a recovery from quorum loss under way, to
	// have its snapshot taken and restored on every member: its Pod may be gone meanwhile.
	SurvivorSnapshot bool `json:"survivorSnapshot,omitempty"`
	// Restoring is the backup the member is the new seed of (a recovery from the loss of
	// every voter's data is under way), until the new cluster answers.
	Restoring *Backup `json:"restoring,omitempty"`
	// Retained: the member held data when a forced recovery restarted another member alone,
	// and left the cluster: its claim is kept for a person to inspect, never deleted by the
	// operator.
	Retained bool `json:"retained,omitempty"`
}

// EtcdView is etcd's own view of its membership and health.
type EtcdView struct {
	ClusterID string `json:"clusterID,omitempty"`
	// Linearizable: the member list was read through the leader with a quorum (a
	// linearizable read). A serializable list is one member's own view, which can be stale:
	// no member is removed and no volume deleted on such a view.
	Linearizable bool `json:"linearizable,omitempty"`
	// LeaderID is the current leader's member ID; empty when there is none.
	LeaderID       string       `json:"leaderID,omitempty"`
	ClusterVersion string       `json:"clusterVersion,omitempty"`
	Members        []EtcdMember `json:"members,omitempty"`
	Alarms         []Alarm      `json:"alarms,omitempty"`
	// HistoryCompacted: the revisions before the current one are compacted. Read only
	// while a NOSPACE alarm is raised.
	HistoryCompacted bool `json:"historyCompacted,omitempty"`
	// Auth says whether etcd's authentication is on; nil when it could not be read.
	Auth *bool `json:"auth,omitempty"`
}

// EtcdMember is one entry of etcd's member list, with its status when it answered.
type EtcdMember struct {
	ID string `json:"id"`
	// Name is empty until an added member starts for the first time.
	Name     string   `json:"name,omitempty"`
	PeerURLs []string `json:"peerURLs,omitempty"`
	// ClientURLs are the client URLs the member advertises.
	ClientURLs []string `json:"clientURLs,omitempty"`
	Learner    bool     `json:"learner,omitempty"`
	// Answering: the member answered a status request. Alarms do not change it.
	Answering bool `json:"answering,omitempty"`
	// Silent: the member did not answer in time, but its process accepts connections. It
	// may well be up: a member still publishing itself to the cluster serves raft and
	// answers no client, for up to 7 seconds in etcd 3.6. No step counts on it being down.
	Silent bool `json:"silent,omitempty"`
	// Leader is the leader the member knows of; empty while it knows none (an election).
	Leader string `json:"leader,omitempty"`
	// Healthy is formatVersion 1's verdict (answered, no errors, knows a leader); Upgrade
	// turns it into the facts above.
	Healthy bool   `json:"healthy,omitempty"`
	Version string `json:"version,omitempty"`
	// RaftIndex is the member's raft index (etcd reports its commit index), to judge whether
	// a learner caught up.
	RaftIndex uint64 `json:"raftIndex,omitempty"`
	// RaftTerm is the member's raft term: of two logs, the one of the later term is the
	// more recent whatever their indexes, as raft's own elections judge.
	RaftTerm uint64 `json:"raftTerm,omitempty"`
	DBSize   int64  `json:"dbSize,omitempty"`
	DBInUse  int64  `json:"dbSizeInUse,omitempty"`
	// Quota is the backend quota the member runs with (etcd 3.6 says; 0 when unknown).
	Quota int64 `json:"quota,omitempty"`
}

// Alarm is an active etcd alarm.
type Alarm struct {
	MemberID string `json:"memberID"`
	Type     string `json:"type"`
}

// Compare orders alarms by type, then member: etcd lists them in no fixed order.
func (a Alarm) Compare(b Alarm) int {
	return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.MemberID, b.MemberID))
}

// MemberName returns the member's name, falling back to the first label of its peer URL's
// host: a member added but not yet started has no name, only its peer URL.
func (m EtcdMember) MemberName() string {
	if m.Name != "" {
		return m.Name
	}
	for _, u := range m.PeerURLs {
		if host := vocab.HostLabel(u); host != "" {
			return host
		}
	}
	return ""
}

// Started reports whether the member has run at least once (etcd only knows its name then).
func (m EtcdMember) Started() bool { return m.Name != "" }

// Upgrade reads an observed state of an earlier format version in the current one,
// pessimistically. In formatVersion 1 a member was "healthy" when it answered without errors
// and knew a leader, and the member list was the best the operator could read, never read
// through a quorum: so the list is not linearizable, and a member that reported a version or
// a raft index answered, whatever its verdict (an alarm made it unhealthy). Only a healthy
// member is known to know the leader.
func (o *Observed) Upgrade() error {
	switch o.FormatVersion {
	case ObservedFormatVersion:
		return nil
	case 1:
		if o.Etcd != nil {
			o.Etcd.Linearizable = false
			for i := range o.Etcd.Members {
				m := &o.Etcd.Members[i]
				m.Answering = m.Healthy || m.Version != "" || m.RaftIndex > 0
				if m.Healthy {
					m.Leader = o.Etcd.LeaderID
				}
				m.Healthy = false
			}
		}
		o.FormatVersion = ObservedFormatVersion
		return nil
	}
	return fmt.Errorf("formatVersion %d is not supported; this version reads formatVersions 1 and %d", o.FormatVersion, ObservedFormatVersion)
}

// Stale says what a plan cannot know when etcd's member list was not read through a
// quorum, "" when it was or when no member answered: one member's own view may miss members
// that joined or left since, so no membership change, restart or deletion is planned on it,
// and an empty plan does not mean the cluster matches the spec.
func (o Observed) Stale() string {
	if o.Etcd == nil || o.Etcd.Linearizable {
		return ""
	}
	return "etcd's member list was not read through a quorum (one member's own view, which may be stale): " +
		"which members etcd has, and so whether members must be added, removed, restarted or deleted, cannot be known " +
		"until a quorum of members answers"
}

// Fingerprint hashes the parts of the observed state that plans depend on. Counters that
// move on every write (raft index, database size) are left out so a plan keeps its ID while
// the cluster serves traffic.
func (o Observed) Fingerprint() string {
	type member struct {
		Name string
		Pod  *Pod
		PVC  *PVC
	}
	type etcdMember struct {
		ID, Name           string
		PeerURLs           []string
		Learner, Answering bool
		Silent             bool `json:",omitempty"`
		Leader, Version    string
	}
	shape := struct {
		ClusterID   string
		NextOrdinal int
		Stalled     []string
		DefragDue   []string    `json:",omitempty"`
		Renewals    []Renewal   `json:",omitempty"`
		Trust       string      `json:",omitempty"`
		CA          *CARotation `json:",omitempty"`
		Join        *Join       `json:",omitempty"`
		Recorded    []RecordedMember
		Members     []member
		Reachable   bool
		Linear      bool
		Leader      string
		Etcd        []etcdMember
		Alarms      []Alarm
	}{ClusterID: o.ClusterID, NextOrdinal: o.NextOrdinal, Stalled: o.StalledLearners, DefragDue: o.DefragDue, Renewals: o.Renewals,
		Trust: o.Trust, CA: o.CA, Join: o.Join, Recorded: o.Recorded}
	for _, m := range o.Members {
		shape.Members = append(shape.Members, member{m.Name, m.Pod, m.PVC})
	}
	sort.Slice(shape.Members, func(i, j int) bool { return shape.Members[i].Name < shape.Members[j].Name })
	if o.Etcd != nil {
		shape.Reachable, shape.Linear = true, o.Etcd.Linearizable
		shape.Leader = o.Etcd.LeaderID
		for _, m := range o.Etcd.Members {
			shape.Etcd = append(shape.Etcd, etcdMember{m.ID, m.Name, m.PeerURLs, m.Learner, m.Answering, m.Silent, m.Leader, m.Version})
		}
		sort.Slice(shape.Etcd, func(i, j int) bool { return shape.Etcd[i].ID < shape.Etcd[j].ID })
		shape.Alarms = o.Etcd.Alarms
	}
	return hashJSON(shape)
}

func hashJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain data always marshals
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}
