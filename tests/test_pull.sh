#!/bin/sh
# llm pull and -m hf://REPO/FILE against a local stand-in for Hugging Face (tests/hf_server.py:
# the URL layout, Range requests, ETag and X-Linked-Etag sha256, redirects, a transfer cut short).
# Usage: tests/test_pull.sh LLM_BINARY MODELS_DIR
llm=$1
models=$2
pass=0; fail=0
tmp=${TMPDIR:-/tmp}/llm-pull-test.$$
mkdir -p "$tmp/root/sub" "$tmp/cache"
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL test_pull: $*"; }
finish() { echo "test_pull: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }
# expect_fail NAME WORD CMD...: exit status 1 (not a crash) and WORD on stderr
expect_fail() {
    name=$1; word=$2; shift 2
    err=$("$@" 2>&1 >/dev/null); rc=$?
    if [ "$rc" -ne 1 ]; then bad "$name: exit status $rc (want 1): $err"; return; fi
    case "$err" in *"$word"*) ok ;; *) bad "$name: message '$err' lacks '$word'" ;; esac
}

command -v python3 >/dev/null 2>&1 || { bad "python3 is needed for the test server"; finish; }
# the fixtures: 300,000 bytes of one pattern, a file in a sub-folder, and a real model
python3 -c 'import sys; sys.stdout.buffer.write(bytes((i * 7 + i // 251) % 256 for i in range(300000)))' \
    > "$tmp/root/data.gguf"
printf 'a small file\n' > "$tmp/root/sub/small file.gguf"
cp "$models/tiny-q4_0.gguf" "$tmp/root/tiny.gguf" || bad "no $models/tiny-q4_0.gguf"
python3 tests/hf_server.py --root "$tmp/root" --port-file "$tmp/port" --log "$tmp/log" --cut 100000 &
server=$!
for _ in $(seq 100); do [ -f "$tmp/port" ] && break; sleep 0.1; done
[ -f "$tmp/port" ] || { bad "the test server did not start"; finish; }
export LLM_HF_ENDPOINT="http://127.0.0.1:$(cat "$tmp/port")/"
export XDG_CACHE_HOME="$tmp/cache"
hf=$tmp/cache/llm.c/hf
: > "$tmp/log"
# requests REPO: the Range headers the server got for REPO, in order
requests() { grep "^/$1/" "$tmp/log" | cut -d' ' -f2 | tr '\n' ' '; }

# bad names: a clear message before any request
expect_fail "repo without owner" "not a Hugging Face repository name" "$llm" pull gemma data.gguf
expect_fail "repo with ..'" "not a Hugging Face repository name" "$llm" pull ../x data.gguf
expect_fail "file with .." "not a file path" "$llm" pull plain/r ../../etc/passwd
expect_fail "file ending in /" "not a file path" "$llm" pull plain/r sub/
expect_fail "pull without a repository" "usage: llm pull REPO[:QUANT]" "$llm" pull
expect_fail "pull with too much" "usage: llm pull REPO[:QUANT]" "$llm" pull plain/r data.gguf more
expect_fail "pull REPO:QUANT FILE" "usage: llm pull REPO[:QUANT]" "$llm" pull plain/r:Q4_0 data.gguf
expect_fail "hf:// without a name" "hf://OWNER/NAME/FILE" "$llm" run -m hf://plain -p hi
expect_fail "hf:// with an empty file" "hf://OWNER/NAME/FILE" "$llm" run -m hf://plain/r/ -p hi
[ -s "$tmp/log" ] && bad "bad names made requests: $(cat "$tmp/log")" || ok

# a plain download: the file, byte for byte, at the cache path printed on stdout; the sha256 of
# the ETag was checked; no .part left
out=$("$llm" pull plain/r data.gguf 2>"$tmp/err") || bad "pull plain: $(cat "$tmp/err")"
[ "$out" = "$hf/plain/r/data.gguf" ] && ok || bad "pull printed '$out', not $hf/plain/r/data.gguf"
cmp -s "$tmp/root/data.gguf" "$hf/plain/r/data.gguf" && ok || bad "plain: the download differs from the file"
grep -q "sha256 checked" "$tmp/err" && ok || bad "plain: the sha256 was not checked: $(cat "$tmp/err")"
[ ! -e "$hf/plain/r/data.gguf.part" ] && ok || bad "plain: the .part file is left"
[ "$(requests plain)" = "- " ] && ok || bad "plain: requests with ranges '$(requests plain)'"
# again: from the cache, no request
out=$("$llm" pull plain/r data.gguf 2>"$tmp/err") && [ "$out" = "$hf/plain/r/data.gguf" ] && ok ||
    bad "pull of a cached file: '$out' $(cat "$tmp/err")"
[ "$(requests plain)" = "- " ] && ok || bad "a cached file was requested again: '$(requests plain)'"

# a transfer cut after 100,000 bytes: resumed with a Range request from there, the file complete
"$llm" pull cut/r data.gguf >/dev/null 2>"$tmp/err" || bad "pull cut: $(cat "$tmp/err")"
cmp -s "$tmp/root/data.gguf" "$hf/cut/r/data.gguf" && ok || bad "cut: the resumed download differs from the file"
[ "$(requests cut)" = "- bytes=100000- " ] && ok || bad "cut: requests '$(requests cut)', want a resume at 100000"

# an interrupted run's .part: the next pull asks for the rest only
mkdir -p "$hf/plain/p"
head -c 12345 "$tmp/root/data.gguf" > "$hf/plain/p/data.gguf.part"
"$llm" pull plain/p data.gguf >/dev/null 2>"$tmp/err" || bad "resume .part: $(cat "$tmp/err")"
cmp -s "$tmp/root/data.gguf" "$hf/plain/p/data.gguf" && ok || bad "resume .part: the file differs"
grep "^/plain/p/" "$tmp/log" | grep -q " bytes=12345-$" && ok || bad "resume .part: no Range request from 12345"

# a .part of other bytes: the sha256 check fails, the damaged download is deleted, a new pull works
mkdir -p "$hf/plain/d"
head -c 5000 /dev/zero > "$hf/plain/d/data.gguf.part"
expect_fail "damaged .part" "sha256" "$llm" pull plain/d data.gguf
[ ! -e "$hf/plain/d/data.gguf" ] && [ ! -e "$hf/plain/d/data.gguf.part" ] && ok || bad "damaged .part: a file is left"
"$llm" pull plain/d data.gguf >/dev/null 2>"$tmp/err" && cmp -s "$tmp/root/data.gguf" "$hf/plain/d/data.gguf" && ok ||
    bad "pull after a damaged download: $(cat "$tmp/err")"

# a server whose sha256 is not the file's
expect_fail "bad sha256" "sha256" "$llm" pull badsum/r data.gguf
[ ! -e "$hf/badsum/r/data.gguf" ] && ok || bad "bad sha256: the file was kept"

# Hugging Face's redirect to its CDN: the sha256 and the size come with the redirect
"$llm" pull redirect/r data.gguf >/dev/null 2>"$tmp/err" || bad "pull redirect: $(cat "$tmp/err")"
cmp -s "$tmp/root/data.gguf" "$hf/redirect/r/data.gguf" && ok || bad "redirect: the file differs"
grep -q "sha256 checked" "$tmp/err" && ok || bad "redirect: X-Linked-Etag was not checked: $(cat "$tmp/err")"

# a server without ranges answers a resume with the whole file: the .part starts over
mkdir -p "$hf/norange/r"
head -c 777 "$tmp/root/data.gguf" > "$hf/norange/r/data.gguf.part"
"$llm" pull norange/r data.gguf >/dev/null 2>"$tmp/err" || bad "pull norange: $(cat "$tmp/err")"
cmp -s "$tmp/root/data.gguf" "$hf/norange/r/data.gguf" && ok || bad "norange: the file differs"

# a file in a sub-folder, with a space in its name (percent-encoded in the URL)
out=$("$llm" pull plain/r "sub/small file.gguf" 2>"$tmp/err") || bad "pull sub/: $(cat "$tmp/err")"
cmp -s "$tmp/root/sub/small file.gguf" "$out" && ok || bad "sub/small file.gguf: '$out' differs"
grep -q "^/plain/r/resolve/main/sub/small%20file.gguf " "$tmp/log" && ok || bad "sub/: the URL was not percent-encoded"

# errors: 404, no server, a full disk (the .part is /dev/full)
expect_fail "404" "not found (HTTP 404" "$llm" pull plain/r missing.gguf
expect_fail "no network" "cannot reach" env LLM_HF_ENDPOINT=http://127.0.0.1:1 "$llm" pull plain/net data.gguf

# a failed pull takes away what it made and holds nothing: its empty .part and the folders it
# created (a new cache's too), but no folder that was there before, and no .part with bytes in it
# (the next pull resumes from them)
[ -d "$hf/plain/r" ] && [ ! -e "$hf/plain/r/missing.gguf.part" ] && ok || bad "404: an empty .part is left in $hf/plain/r"
[ ! -e "$hf/plain/net" ] && ok || bad "no network: the folders of the failed pull are left: $(ls -R "$hf/plain/net" 2>&1)"
mkdir -p "$tmp/fresh"
expect_fail "404 in a new cache" "not found (HTTP 404" env XDG_CACHE_HOME="$tmp/fresh/cache" "$llm" pull gone/r deep/er/missing.gguf
[ -d "$tmp/fresh" ] && [ ! -e "$tmp/fresh/cache" ] && ok || bad "404 in a new cache: left $(find "$tmp/fresh" 2>&1 | tr '\n' ' ')"
mkdir -p "$hf/keep"
expect_fail "404 under a folder that was there" "not found (HTTP 404" "$llm" pull keep/r sub/missing.gguf
[ -d "$hf/keep" ] && [ ! -e "$hf/keep/r" ] && ok || bad "404 under $hf/keep: left $(find "$hf/keep" 2>&1 | tr '\n' ' ')"
mkdir -p "$hf/plain/net2"
head -c 1000 "$tmp/root/data.gguf" > "$hf/plain/net2/data.gguf.part"
expect_fail "no network, a .part with bytes" "cannot reach" env LLM_HF_ENDPOINT=http://127.0.0.1:1 "$llm" pull plain/net2 data.gguf
[ "$(wc -c < "$hf/plain/net2/data.gguf.part" 2>/dev/null | tr -d ' ')" = 1000 ] && ok || bad "no network: the .part with bytes was not kept"

# on_tty OUT CMD...: CMD with its stderr on a pseudo-terminal (where pull draws its progress
# bar), what it wrote there in OUT; returns CMD's exit status
on_tty() {
    python3 - "$@" <<'EOF_PY'
import os, pty, subprocess, sys
m, s = pty.openpty()
p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=s)
os.close(s)
with open(sys.argv[1], "wb") as f:
    while True:
        try:
            b = os.read(m, 1 << 16)
        except OSError:   # EIO: the program and its children closed the terminal
            break
        if not b:
            break
        f.write(b)
rc = p.wait()
sys.exit(rc if rc >= 0 else 128 - rc)
EOF_PY
}
# a server that sends more than it announced (Content-Range: bytes 0-0/1, then 4 MB): refused as
# a size mismatch as soon as the announced size is passed, the bytes deleted; the progress bar on
# the terminal stays within its line (its width once came from the overshoot: a signed overflow,
# megabytes of spaces)
on_tty "$tmp/tty" "$llm" pull overlong/r data.gguf; rc=$?
[ "$rc" -eq 1 ] && ok || bad "overlong: exit status $rc (want 1): $(tail -c 800 "$tmp/tty")"
grep -q "more than the 1 bytes it announced" "$tmp/tty" && ok || bad "overlong: message '$(tail -c 800 "$tmp/tty")'"
size=$(wc -c < "$tmp/tty" | tr -d ' ')
[ "$size" -lt 4096 ] && ok || bad "overlong: $size bytes on the terminal"
[ ! -e "$hf/overlong/r/data.gguf" ] && [ ! -e "$hf/overlong/r/data.gguf.part" ] && ok || bad "overlong: a download is left"
mkdir -p "$hf/plain/full"
ln -s /dev/full "$hf/plain/full/data.gguf.part"
expect_fail "disk full" "No space left on device" "$llm" pull plain/full data.gguf

# -m hf://: pulled on first use, then the cached file; the same tokens as the local file
want=$("$llm" run -m "$models/tiny-q4_0.gguf" --tokens 1,300 -n 6 --temp 0 --json -t 1 2>/dev/null | sed 's/"prompt_tps.*//')
"$llm" run -m hf://redirect/m/tiny.gguf --tokens 1,300 -n 6 --temp 0 --json -t 1 >"$tmp/out" 2>"$tmp/err" ||
    bad "run -m hf:// failed: $(cat "$tmp/err")"
got=$(sed 's/"prompt_tps.*//' "$tmp/out")
[ -n "$want" ] && [ "$got" = "$want" ] && ok || bad "run -m hf://: '$got' vs '$want': $(cat "$tmp/err")"
n=$(grep -c "^/redirect/m/" "$tmp/log")
"$llm" info -m hf://redirect/m/tiny.gguf >/dev/null 2>"$tmp/err" || bad "info -m hf://: $(cat "$tmp/err")"
[ "$(grep -c "^/redirect/m/" "$tmp/log")" = "$n" ] && ok || bad "-m hf:// requested a cached file again"
finish
