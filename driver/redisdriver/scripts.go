package redisdriver

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed common.lua
	commonLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed refresh.lua
	refreshLua string
	//go:embed release.lua
	releaseLua string
	//go:embed acquire_fast.lua
	acquireFastLua string
	//go:embed release_fast.lua
	releaseFastLua string
)

// The scripts: each is its fast path, if any, then common.lua, then its
// body. A fast path runs before the prelude's definitions, which cost
// several microseconds of server time per call.
var (
	acquireScript = newScript(acquireFastLua, acquireLua)
	refreshScript = newScript("", refreshLua)
	releaseScript = newScript(releaseFastLua, releaseLua)
)

// script is one Lua script. Its source and SHA-1 are boxed once, so that
// building a command does not allocate them.
type script struct {
	src any // string: the source, for EVAL
	sha any // string: the hex SHA-1 of the source, for EVALSHA
}

func newScript(fast, body string) *script {
	src := fast + "\n" + commonLua + "\n" + body
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:])}
}

// Positions in the arguments of a script command, which are those of
// EVALSHA: "evalsha", sha, numkeys (1), KEYS[1], ARGV... The command names
// are lower case, which go-redis's Cmd.Name returns without allocating.
const (
	argName    = 0
	argBody    = 1
	argNumKeys = 2
	argKey     = 3
)

// args returns the arguments of the EVALSHA command that runs s on the
// lock whose base key is base (see Driver.base), with argv as ARGV. The
// base is the script's only key: the scripts derive the lock's keys from
// it (see common.lua).
func (s *script) args(base string, argv ...any) []any {
	args := make([]any, argKey+1+len(argv))
	args[argName], args[argBody], args[argNumKeys], args[argKey] = "evalsha", s.sha, 1, base
	copy(args[argKey+1:], argv)
	return args
}

// evalArgs returns args, the arguments of an EVALSHA of s, turned into
// those of an EVAL of s, in a new slice.
func (s *script) evalArgs(args []any) []any {
	e := append([]any(nil), args...)
	e[argName], e[argBody] = "eval", s.src
	return e
}

// newCmd returns the command of args, routed on Cluster by KEYS[1].
func newCmd(ctx context.Context, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(argKey)
	return cmd
}

// run sends the EVALSHA of args, built by s.args, and sends it
// again as EVAL, which caches the script, when the server does not have
// the script (NOSCRIPT).
func (d *Driver) run(ctx context.Context, s *script, args []any) (any, error) {
	cmd := newCmd(ctx, args)
	_ = d.client.Process(ctx, cmd)
	if isNoScript(cmd.Err()) {
		cmd = newCmd(ctx, s.evalArgs(args))
		_ = d.client.Process(ctx, cmd)
	}
	return cmd.Result()
}
