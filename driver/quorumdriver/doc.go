// Package quorumdriver is a locker driver over N independent member
// drivers, in the manner of Redlock: a grant needs a majority of members.
package quorumdriver
