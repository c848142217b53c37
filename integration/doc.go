// Package integration holds no code: its module, which is not published,
// keeps the tests that need a module no user of locker should get in
// their module graph (miniredis; a second backend client for a
// module whose users bring their own).
package integration
