package reconcile

import (
	"sync"

	"github.com/staticlet/staticlet/internal/pod"
)

// message is what the reconciler's loop sends a worker. It is the only
// way in: the worker's state has one owner, the worker's goroutine.
type message interface{ isMessage() }

type (
	// desiredMsg hands the worker a new desired pod, nil when it must go.
	desiredMsg struct{ pod *pod.Pod }
	// verdictMsg is a probe verdict about one of the pod's containers.
	verdictMsg struct{ v pod.ProbeVerdict }
	// imagesMsg tells of images that became present.
	imagesMsg struct{ names []string }
	// devicesMsg tells of CDI devices of kinds given back.
	devicesMsg struct{ kinds []string }
	// haltMsg orders the pod stopped for a node shutdown.
	haltMsg struct{ order *haltOrder }
	// resumeMsg lifts a halt: the node's shutdown was cancelled.
	resumeMsg struct{}
	// leavingMsg tells that the pod's manifest is gone and its removal
	// waits for pods that stop first: it starts nothing meanwhile.
	leavingMsg struct{}
	// pokeMsg asks for a look at the pod.
	pokeMsg struct{}
	// depsMsg tells whether each pod the pod starts after is Ready.
	depsMsg struct{ ready map[string]bool }
	// fileMsg tells that a file a container of the pod mounts changed.
	fileMsg struct{ change pod.FileChange }
	// restartMsg asks for containers to be restarted now, their backoff
	// reset (staticlet restart).
	restartMsg struct{ names []string }
)

func (desiredMsg) isMessage() {}
func (verdictMsg) isMessage() {}
func (imagesMsg) isMessage()  {}
func (devicesMsg) isMessage() {}
func (haltMsg) isMessage()    {}
func (resumeMsg) isMessage()  {}
func (leavingMsg) isMessage() {}
func (pokeMsg) isMessage()    {}
func (depsMsg) isMessage()    {}
func (fileMsg) isMessage()    {}
func (restartMsg) isMessage() {}

// mailbox is a worker's queue of messages: sending never blocks, whatever
// the worker is doing, and the worker takes them all at once.
type mailbox struct {
	ready chan struct{} // holds a token while messages wait

	mu     sync.Mutex
	msgs   []message
	closed bool
}

func newMailbox() *mailbox { return &mailbox{ready: make(chan struct{}, 1)} }

// send queues m; false when the worker has gone, so the sender starts
// another.
func (m *mailbox) send(msg message) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.msgs = append(m.msgs, msg)
	select {
	case m.ready <- struct{}{}:
	default:
	}
	return true
}

// take returns the messages waiting, oldest first.
func (m *mailbox) take() []message {
	m.mu.Lock()
	defer m.mu.Unlock()
	msgs := m.msgs
	m.msgs = nil
	return msgs
}

// close closes the mailbox unless messages wait, which the worker must
// take first; it reports whether it did.
func (m *mailbox) close() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.msgs) > 0 {
		return false
	}
	m.closed = true
	return true
}
