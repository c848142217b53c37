#!/bin/sh
# compare.sh compares two builds of locker with bench/, in one run, in
# interleaved rounds (old, new, old, new, ...), and prints one markdown
# table per cell: old median, new median, new/old.
#
#	bench/compare.sh [-src here|own] OLD_REV NEW_REV [bench flags...]
#
# It checks both revisions out into temporary git worktrees, builds the
# bench binary for each against that revision's locker, and runs
# `bench -compare OLD,NEW`: the servers start once, and in every round each
# selected cell runs in the old binary and then in the new one. Without
# flags: locker's own systems (no peers) on Redis, etcd and ZooKeeper, the
# five cell kinds (u, p, c, churn, many), 4 rounds of 1 s per cell, about
# 7 minutes on 2 cores. Flags go to bench (`cd bench && go run . -h`),
# e.g. -servers redis, -cells u,p, -compare-rounds 6, -d 2s,
# -compare-keep DIR (each run's JSON and markdown report).
#
# -src here (the default) builds both binaries from the bench sources next
# to this script, so that the two builds differ only in locker; -src own
# builds each from its revision's bench/ (both must have -compare). Across
# the module layout (a build from before the driver modules against one
# after), use -src own: the newer bench/ imports drivers the older tree
# does not have. Each side builds in its revision's go.work.
#
# The temporary worktrees and binaries are removed at the end; nothing is
# written into the repository but git's worktree bookkeeping, which is
# pruned.
set -eu

usage() {
	echo "usage: $0 [-src here|own] OLD_REV NEW_REV [bench flags...]" >&2
	exit 2
}

src=here
if [ "${1:-}" = "-src" ]; then
	[ $# -ge 2 ] || usage
	src=$2
	shift 2
fi
case $src in here | own) ;; *) usage ;; esac
[ $# -ge 2 ] || usage
old=$1
new=$2
shift 2

here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
oldsha=$(git -C "$repo" rev-parse --verify --quiet "$old^{commit}") || {
	echo "compare.sh: $old: not a revision" >&2
	exit 2
}
newsha=$(git -C "$repo" rev-parse --verify --quiet "$new^{commit}") || {
	echo "compare.sh: $new: not a revision" >&2
	exit 2
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/locker-compare-XXXXXX")
cleanup() {
	for side in old new; do
		if [ -d "$tmp/$side" ]; then
			git -C "$repo" worktree remove --force "$tmp/$side" || true
		fi
	done
	rm -rf "$tmp"
	git -C "$repo" worktree prune
}
trap cleanup EXIT
trap 'exit 130' INT TERM

goversion=$(go env GOVERSION)
goversion=${goversion#go}

# build SIDE SHA checks SHA out into $tmp/SIDE and builds $tmp/SIDE.bin.
build() {
	side=$1
	wt=$tmp/$side
	git -C "$repo" worktree add --detach --quiet "$wt" "$2"
	if [ ! -f "$wt/bench/go.mod" ]; then
		echo "compare.sh: $2 has no bench/go.mod" >&2
		exit 1
	fi
	if [ "$src" = here ]; then
		rm -f "$wt"/bench/*.go
		cp "$here"/*.go "$wt/bench/"
	fi
	# The revision's own go.work when it has one: it names every module of
	# that revision (the root, a module per driver, bench) and replaces
	# their published versions with its directories, so the bench builds
	# against that revision's locker on either side of the module layout.
	# Without one, a workspace of the revision's root module and its bench
	# module, replacing the version bench/go.mod requires so that the
	# module graph does not ask the proxy for a locker release.
	if [ -f "$wt/go.work" ]; then
		work=$wt/go.work
	else
		work=$tmp/$side.work
		ver=$(awk '$1 == "github.com/go-locker/locker" { print $2 } $1 == "require" && $2 == "github.com/go-locker/locker" { print $3 }' "$wt/bench/go.mod")
		{
			printf 'go %s\n\nuse (\n\t./%s\n\t./%s/bench\n)\n' "$goversion" "$side" "$side"
			if [ -n "$ver" ]; then
				printf '\nreplace github.com/go-locker/locker %s => ./%s\n' "$ver" "$side"
			fi
		} >"$work"
		if [ -f "$wt/go.work.sum" ]; then
			cp "$wt/go.work.sum" "$tmp/$side.work.sum"
		fi
	fi
	echo "compare.sh: building $side ($2) ..." >&2
	if ! (cd "$wt/bench" && GOWORK="$work" go build -o "$tmp/$side.bin" .); then
		if [ "$src" = here ]; then
			echo "compare.sh: the bench sources in $here do not build against $side's locker ($2):" >&2
			echo "compare.sh: its API differs from theirs; if both revisions' bench/ have -compare, use -src own" >&2
		fi
		exit 1
	fi
}

build old "$oldsha"
build new "$newsha"

short() { git -C "$repo" rev-parse --short=12 "$1"; }
cmd="bench/compare.sh"
if [ "$src" != here ]; then
	cmd="$cmd -src $src"
fi
cmd="$cmd $(short "$oldsha") $(short "$newsha")"
for a in "$@"; do
	case $a in
	*[!A-Za-z0-9_./,:=@%+-]* | '') cmd="$cmd '$(printf %s "$a" | sed "s/'/'\\\\''/g")'" ;;
	*) cmd="$cmd $a" ;;
	esac
done

"$tmp/new.bin" -compare "$tmp/old.bin,$tmp/new.bin" \
	-compare-names "old $(git -C "$repo" rev-parse --short "$oldsha"),new $(git -C "$repo" rev-parse --short "$newsha")" \
	-compare-cmd "$cmd" "$@"
