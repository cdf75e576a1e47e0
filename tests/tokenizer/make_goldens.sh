#!/bin/sh
# Makes tests/tokenizer/<vocab>.plain.out and <vocab>.special.out with llama.cpp's llama-tokenize
# for every case of tests/tokenizer/corpus.inp, then of corpus_invalid.inp (one line per case,
# in that order; ids separated by single spaces; an empty line for no tokens).
#   plain    BOS where the vocabulary asks for it, control-token text tokenized as plain text
#            (llama-tokenize --no-parse-special)
#   special  BOS where the vocabulary asks for it, control-token text parsed (its default)
# Each case is written to a file of its own and read with -f, which keeps its bytes exactly;
# --no-escape keeps "\n" written as two characters in the code cases as they are.
# Before that, the same pipeline is checked against llama.cpp's own vectors (the .inp/.out files
# beside the vocabularies, made without BOS and without special parsing).
#
# Run from the repository root:  sh tests/tokenizer/make_goldens.sh
#   LLM_PEER_DIR   where llama.cpp is built (default $HOME/.cache/llm-peer; the tool is
#                  $LLM_PEER_DIR/llama.cpp/build/bin/llama-tokenize)
#   LLM_VOCAB_DIR  the ggml-vocab-*.gguf files (default: vocab/ in the cache of tests/fixtures.sh,
#                  ${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}, where it puts them)
#   VOCABS         which of them (default "llama-spm llama-bpe qwen2 gpt-2 phi-3"; VOCABS= does
#                  none of them)
#   PRES           which test models of pre-tokenizers (below; default all, PRES= none)
#   REAL           which real vocabularies (default "gemma-3 tekken": Gemma 3's SentencePiece
#                  vocabulary of 262,144 tokens, from $LLM_REAL_MODELS/gemma-3-270m-q4_k_m.gguf,
#                  default the models/ folder of the cache of tests/fixtures.sh; the tekken
#                  vocabulary of Mistral NeMo / Small 3, tekken/ggml-vocab-tekken.gguf in that
#                  cache, which tests/fixtures.sh converts from mistral_common's; REAL= none)
set -e
peer=${LLM_PEER_DIR:-$HOME/.cache/llm-peer}
tok=$peer/llama.cpp/build/bin/llama-tokenize
vocab_dir=${LLM_VOCAB_DIR:-${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}/vocab}
here=tests/tokenizer
[ -x "$tok" ] || { echo "no llama-tokenize at $tok" >&2; exit 1; }
[ -f "$here/corpus.inp" ] || { echo "run from the repository root" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# split FILE DIR: the cases of an .inp file (each followed by "\n__ggml_vocab_test__\n", as
# llama.cpp's tests/test-tokenizer-0.cpp reads them) as DIR/000000, DIR/000001, ...
split_cases() {
    mkdir -p "$2"
    perl -e '
        local $/; open(my $f, "<:raw", $ARGV[0]) or die "$ARGV[0]: $!"; my $s = <$f>;
        my $sep = "\n__ggml_vocab_test__\n"; my ($pos, $i) = (0, 0);
        while ($pos < length $s) {
            my $next = index($s, $sep, $pos);
            $next = length $s if $next < 0;
            open(my $o, ">:raw", sprintf("%s/%06d", $ARGV[1], $i++)) or die; print $o substr($s, $pos, $next - $pos); close $o;
            $pos = $next + length $sep;
        }' "$1" "$2"
}

# ids VOCAB FILE [FLAGS...]: the token ids as "1 2 3"
ids() {
    v=$1; f=$2; shift 2
    out=$("$tok" -m "$v" -f "$f" --ids --log-disable --no-escape "$@" 2>"$tmp/err") || {
        echo "llama-tokenize failed on $f:" >&2; cat "$tmp/err" >&2; return 1; }
    case "$out" in
        \[*\]) ;;
        *) echo "unexpected output for $f: $out" >&2; return 1 ;;
    esac
    printf '%s\n' "$out" | sed -e 's/^\[//' -e 's/\]$//' -e 's/, / /g'
}

split_cases "$here/corpus.inp" "$tmp/cases"
n_valid=$(ls "$tmp/cases" | wc -l)
split_cases "$here/corpus_invalid.inp" "$tmp/invalid"
n_invalid=$(ls "$tmp/invalid" | wc -l)
echo "corpus: $n_valid valid cases, $n_invalid invalid"

# goldens NAME FILE: $here/NAME.plain.out and NAME.special.out for every case
goldens() {
    : > "$tmp/plain"; : > "$tmp/special"
    for f in "$tmp"/cases/* "$tmp"/invalid/*; do
        ids "$2" "$f" --no-parse-special >> "$tmp/plain"
        ids "$2" "$f" >> "$tmp/special"
    done
    mv "$tmp/plain" "$here/$1.plain.out"
    mv "$tmp/special" "$here/$1.special.out"
    echo "$here/$1.plain.out $here/$1.special.out: $(wc -l < "$here/$1.plain.out") lines"
}

for name in ${VOCABS-llama-spm llama-bpe qwen2 gpt-2 phi-3}; do
    v=$vocab_dir/ggml-vocab-$name.gguf
    [ -f "$v" ] || { echo "missing $v" >&2; exit 1; }

    # the pipeline against llama.cpp's own vectors
    rm -rf "$tmp/own"; split_cases "$v.inp" "$tmp/own"
    : > "$tmp/own.out"
    for f in "$tmp"/own/*; do ids "$v" "$f" --no-bos --no-parse-special >> "$tmp/own.out"; done
    if ! sed 's/^ *//; s/ *$//' "$v.out" | cmp -s - "$tmp/own.out"; then
        echo "$name: llama-tokenize does not reproduce $v.out" >&2
        sed 's/^ *//; s/ *$//' "$v.out" | diff - "$tmp/own.out" | head -n 20 >&2
        exit 1
    fi

    goldens "$name" "$v"
done

# The pre-tokenizers no vocabulary file here uses: test models with GPT-2's vocabulary and
# tokenizer.ggml.pre "default" / "smollm" / "tekken" / "gpt-4o" (tests/models.txt; `make models` writes them).
models=${LLM_TEST_MODELS:-build/models}
for name in ${PRES-pre-default pre-smollm pre-tekken pre-gpt-4o}; do
    v=$models/tiny-$name.gguf
    [ -f "$v" ] || { echo "missing $v (run make models)" >&2; exit 1; }
    goldens "$name" "$v"
    # cases that tell tekken's upper- and lower-case alternatives apart (the corpus has few), on
    # tiny-tekken-split, whose tokens are every piece of them (one token per word: the ids show
    # the split); BOS, control-token text as plain text
    if [ "$name" = pre-tekken ]; then
        v=$models/tiny-tekken-split.gguf
        [ -f "$v" ] || { echo "missing $v (run make models)" >&2; exit 1; }
        rm -rf "$tmp/tekken"; split_cases "$here/corpus_tekken.inp" "$tmp/tekken"
        : > "$tmp/tekken.out"
        for f in "$tmp"/tekken/*; do ids "$v" "$f" --no-parse-special >> "$tmp/tekken.out"; done
        mv "$tmp/tekken.out" "$here/tekken-split.out"
        echo "$here/tekken-split.out: $(wc -l < "$here/tekken-split.out") lines"
    fi
done

# Real models' vocabularies (llama-tokenize reads only the vocabulary of the file).
real=${LLM_REAL_MODELS:-${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}/models}
for name in ${REAL-gemma-3 tekken}; do
    case $name in
        gemma-3) v=$real/gemma-3-270m-q4_k_m.gguf ;;
        tekken) v=${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}/tekken/ggml-vocab-tekken.gguf ;;
        *) echo "unknown real model $name" >&2; exit 1 ;;
    esac
    [ -f "$v" ] || { echo "missing $v (tests/fixtures.sh fetches it)" >&2; exit 1; }
    goldens "$name" "$v"
done
