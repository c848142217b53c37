package redisdriver

import (
	_ "embed"

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
)

// The scripts. Script.Run sends EVALSHA and falls back to EVAL (which
// caches the script) when the server answers NOSCRIPT.
var (
	acquireScript = redis.NewScript(commonLua + "\n" + acquireLua)
	refreshScript = redis.NewScript(commonLua + "\n" + refreshLua)
	releaseScript = redis.NewScript(commonLua + "\n" + releaseLua)
)
