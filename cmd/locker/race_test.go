//go:build race

package main

// raceEnabled: the tests run with -race, and so is the command built.
const raceEnabled = true
