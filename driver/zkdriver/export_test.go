package zkdriver

// ParentPath returns the path of key's node under root, as a Driver with
// Options.Root root names it.
func ParentPath(root, key string) string {
	parent, _ := (&Driver{root: root}).paths(key)
	return parent
}

// LockNodes returns the names among children that are lock nodes (of
// holders or waiters), in queue order.
func LockNodes(children []string) []string {
	var names []string
	for _, c := range parseQueue(children) {
		names = append(names, c.name)
	}
	return names
}

// HolderNodes returns the names among children of the lock nodes that hold
// the lock: the first node if it is exclusive, else the shared nodes before
// the first exclusive one.
func HolderNodes(children []string) []string {
	var names []string
	q := parseQueue(children)
	for _, c := range q[:q.held()] {
		names = append(names, c.name)
	}
	return names
}

// SessionClosed reports whether s knows its connection closed.
func SessionClosed(s *Session) bool {
	select {
	case <-s.done():
		return true
	default:
		return false
	}
}
